// Launches the reference atproto PDS (npm @atproto/pds) plus an in-memory PLC
// for fakepds conformance tests. Run it with Node 22 through run.sh.
//
// stdout carries exactly one JSON line once the PDS is ready; every log line
// goes to stderr. See README.md for the environment variables.

import dns from 'node:dns'
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import util from 'node:util'

const HERE = path.dirname(fileURLToPath(import.meta.url))
const HOST = '127.0.0.1'
const SYNC_NAMES = ['OFF', 'NORMAL', 'FULL', 'EXTRA']

const log = (...args) =>
  process.stderr.write(`[reference-pds] ${util.format(...args)}\n`)

let tmpDirToRemove = null
const removeTmpDir = () => {
  if (!tmpDirToRemove) return
  try {
    fs.rmSync(tmpDirToRemove, { recursive: true, force: true })
  } catch (err) {
    log(`could not remove ${tmpDirToRemove}: ${err.message}`)
  }
  tmpDirToRemove = null
}
process.on('exit', removeTmpDir)

const die = (msg, code = 1) => {
  log(`error: ${msg}`)
  process.exit(code)
}

// ---------------------------------------------------------------- settings

if (Number(process.versions.node.split('.')[0]) < 22) {
  die(
    `Node ${process.versions.node} is too old: @atproto/pds needs Node >= 22. ` +
      `Start the launcher with ${path.join(HERE, 'run.sh')}.`,
    2,
  )
}

const parseFsync = () => {
  const v = process.env.HARNESS_PDS_FSYNC
  if (v === undefined || v === '' || v === '0') return false
  if (v === '1') return true
  die(
    `HARNESS_PDS_FSYNC=${JSON.stringify(v)} is not accepted: ` +
      `use unset, empty or 0 (synchronous=OFF, no fsync) or 1 (stock SQLite durability)`,
    2,
  )
}

const parsePort = (name, value) => {
  if (value === undefined || value === '') return 0
  if (!/^\d+$/.test(value) || Number(value) > 65535) {
    die(`${name}=${JSON.stringify(value)} is not a port number (0..65535, 0 = pick a free one)`, 2)
  }
  return Number(value)
}

const parseArgs = (argv) => {
  const out = {}
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    const m = /^--(port|plc-port)(?:=(.*))?$/.exec(arg)
    if (!m) die(`unknown argument ${JSON.stringify(arg)} (accepted: --port N, --plc-port N)`, 2)
    let value = m[2]
    if (value === undefined) {
      value = argv[++i]
      if (value === undefined) die(`--${m[1]} needs a value`, 2)
    }
    out[m[1]] = value
  }
  return out
}

const args = parseArgs(process.argv.slice(2))
const fsync = parseFsync()
const wantPdsPort = parsePort('--port / HARNESS_PDS_PORT', args.port ?? process.env.HARNESS_PDS_PORT)
const wantPlcPort = parsePort('--plc-port / HARNESS_PLC_PORT', args['plc-port'] ?? process.env.HARNESS_PLC_PORT)
if (wantPdsPort !== 0 && wantPdsPort === wantPlcPort) die('the PDS and PLC ports must differ', 2)

// ------------------------------------------------ keep stdout for the JSON

// Anything that writes through process.stdout (console.log & co) goes to
// stderr; the ready line is written straight to fd 1.
process.stdout.write = process.stderr.write.bind(process.stderr)
// The atproto/PLC pino loggers write to fd 1 unless given a destination.
if (/^(true|t|1)$/i.test(process.env.LOG_ENABLED ?? '') && !process.env.LOG_DESTINATION) {
  process.env.LOG_DESTINATION = '/dev/stderr'
}

// ------------------------------------------------- bind to 127.0.0.1 only

// The PDS and PLC servers call listen(port) without a host (all interfaces).
// Add the loopback host, and hand over ports reserved by freePort() at the
// last moment so that parallel launchers do not pick the same port.
const origListen = net.Server.prototype.listen
const reserved = new Map() // port -> placeholder server
net.Server.prototype.listen = function (...a) {
  let port
  if (typeof a[0] === 'number' || (typeof a[0] === 'string' && /^\d+$/.test(a[0]))) {
    port = Number(a[0])
    if (typeof a[1] !== 'string') a.splice(1, 0, HOST)
  } else if (a[0] && typeof a[0] === 'object' && !(a[0] instanceof net.Server) &&
    a[0].host === undefined && a[0].path === undefined && a[0].fd === undefined && a[0].handle === undefined) {
    port = Number(a[0].port ?? 0)
    a[0] = { ...a[0], host: HOST }
  } else if (a.length === 0 || typeof a[0] === 'function') {
    port = 0
    a.unshift(0, HOST)
  }
  const placeholder = port ? reserved.get(port) : undefined
  if (placeholder) {
    reserved.delete(port)
    placeholder.close(() => origListen.apply(this, a))
    return this
  }
  return origListen.apply(this, a)
}

const reservePort = (port) =>
  new Promise((resolve, reject) => {
    const s = net.createServer()
    s.unref()
    s.once('error', (err) =>
      reject(new Error(`cannot bind ${HOST}:${port}: ${err.code ?? err.message}`)),
    )
    origListen.call(s, port, HOST, () => {
      const got = s.address().port
      reserved.set(got, s)
      resolve(got)
    })
  })

// "localhost" (the PDS's own public URL) resolves to 127.0.0.1 first.
dns.setDefaultResultOrder('ipv4first')

// ------------------------------------------------------------ data dirs

let baseDir
if (process.env.HARNESS_PDS_DIR) {
  baseDir = path.resolve(process.env.HARNESS_PDS_DIR)
  fs.mkdirSync(baseDir, { recursive: true })
  if (fs.readdirSync(baseDir).length > 0) {
    log(`warning: HARNESS_PDS_DIR ${baseDir} is not empty; old accounts will not resolve (the PLC is in memory)`)
  }
} else {
  baseDir = fs.mkdtempSync(path.join(os.tmpdir(), 'fakepds-reference-pds-'))
  tmpDirToRemove = baseDir
}
const dataDirectory = path.join(baseDir, 'data')
const blobDir = path.join(baseDir, 'blobs')
fs.mkdirSync(dataDirectory, { recursive: true })

// ---------------------------------------------------------------- start

const nm = (p) => pathToFileURL(path.join(HERE, 'node_modules', p)).href
const readJson = (p) => JSON.parse(fs.readFileSync(path.join(HERE, 'node_modules', p), 'utf8'))

let shuttingDown = false
let network = null // { pds, plc }

const shutdown = async (why, code = 0) => {
  if (shuttingDown) return
  shuttingDown = true
  log(`shutting down (${why})`)
  const force = setTimeout(() => {
    log('shutdown took over 15 s; exiting anyway')
    process.exit(1)
  }, 15_000)
  force.unref()
  let exitCode = code
  if (network) {
    for (const [name, svc] of [['pds', network.pds], ['plc', network.plc]]) {
      if (!svc) continue
      try {
        await svc.close()
      } catch (err) {
        log(`error closing ${name}: ${err?.stack ?? err}`)
        exitCode = exitCode || 1
      }
    }
  }
  for (const s of reserved.values()) s.close()
  removeTmpDir()
  process.exit(exitCode)
}

for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(sig, () => {
    if (shuttingDown) {
      log(`second ${sig}; exiting now`)
      process.exit(1)
    }
    void shutdown(sig)
  })
}

// Stop when stdin closes, so a parent that dies takes us down. Only a pipe or
// a socket is watched: /dev/null (Go's default for exec.Cmd) would close at once.
const watchStdin = () => {
  let st
  try {
    st = fs.fstatSync(0)
  } catch {
    return false
  }
  if (!st.isFIFO() && !st.isSocket()) return false
  process.stdin.on('data', () => {})
  process.stdin.on('end', () => void shutdown('stdin closed'))
  process.stdin.on('error', () => void shutdown('stdin error'))
  process.stdin.resume()
  return true
}

const main = async () => {
  const t0 = performance.now()
  const version = readJson('@atproto/pds/package.json').version

  const { Database } = await import('@atproto/pds')
  const { sql } = await import('kysely')
  const { Secp256k1Keypair } = await import('@atproto/crypto')
  // dev-env's exports map only exposes its index, which also loads the
  // appview and ozone; import the pieces we use by file.
  const { TestPlc } = await import(nm('@atproto/dev-env/dist/plc.js'))
  const { TestPds } = await import(nm('@atproto/dev-env/dist/pds.js'))
  const { mockNetworkUtilities } = await import(nm('@atproto/dev-env/dist/util.js'))
  const { ADMIN_PASSWORD } = await import(nm('@atproto/dev-env/dist/const.js'))
  const adminPassword = process.env.HARNESS_PDS_ADMIN_PASSWORD || ADMIN_PASSWORD

  // Every SQLite database of the PDS is opened through Database.sqlite, looked
  // up at call time. Keep the options as passed (the sequencer passes its
  // pragmas as the whole options object) and only add synchronous=OFF.
  if (!fsync) {
    if (typeof Database?.sqlite !== 'function') {
      throw new Error('@atproto/pds no longer exports Database.sqlite: the synchronous=OFF patch cannot be applied')
    }
    const origSqlite = Database.sqlite
    Database.sqlite = function (location, opts) {
      const o = opts && typeof opts === 'object' ? opts : {}
      return origSqlite.call(this, location, {
        ...o,
        pragmas: { ...(o.pragmas ?? {}), synchronous: 'OFF' },
      })
    }
  }

  const pdsPort = await reservePort(wantPdsPort)
  const plcPort = await reservePort(wantPlcPort)
  log(`starting PLC on ${HOST}:${plcPort} and @atproto/pds ${version} on ${HOST}:${pdsPort}, data in ${baseDir}, fsync ${fsync ? 'on' : 'off'}`)

  network = {}
  network.plc = await TestPlc.create({ port: plcPort })
  network.pds = await TestPds.create({
    port: pdsPort,
    // localhost, not the IP literal: the PDS's fetch refuses IP-literal
    // hosts ("Invalid hostname"), and its DID resolution would fail.
    didPlcUrl: `http://localhost:${plcPort}`,
    dataDirectory,
    blobstoreDiskLocation: blobDir,
    blobstoreDiskTmpLocation: path.join(baseDir, 'blobs-tmp'),
    adminPassword,
  })
  mockNetworkUtilities(network.pds)
  const ctx = network.pds.ctx

  // Prove the patch: read PRAGMA synchronous back from the handles the PDS
  // opened, and from an actor store opened the way the PDS opens one.
  const readSync = async (db) => {
    const res = await sql`PRAGMA synchronous`.execute(db.db)
    return Number(res.rows[0]?.synchronous)
  }
  const seen = []
  seen.push(['account manager', await readSync(ctx.accountManager.db)])
  seen.push(['sequencer', await readSync(ctx.sequencer.db)])
  if (ctx.didCache?.db) seen.push(['did cache', await readSync(ctx.didCache.db)])
  const probeDid = `did:plc:harnessprobe${Date.now().toString(36)}${process.pid}`
  await ctx.actorStore.create(probeDid, await Secp256k1Keypair.create({ exportable: true }))
  try {
    seen.push(['actor store (probe)', await ctx.actorStore.read(probeDid, (store) => readSync(store.db))])
  } finally {
    await ctx.actorStore.destroy(probeDid)
  }
  const bad = seen.filter(([, v]) => (fsync ? v === 0 : v !== 0))
  log(`PRAGMA synchronous: ${seen.map(([n, v]) => `${n}=${v} (${SYNC_NAMES[v] ?? '?'})`).join(', ')}`)
  if (bad.length > 0) {
    throw new Error(
      `synchronous is not ${fsync ? 'on' : 'OFF'} for: ${bad.map(([n]) => n).join(', ')}; ` +
        `HARNESS_PDS_FSYNC=${fsync ? 1 : 0} did not take`,
    )
  }

  const ready = {
    url: `http://${HOST}:${pdsPort}`,
    plcUrl: `http://${HOST}:${plcPort}`,
    adminPassword,
    fsync,
    version,
  }
  const watching = watchStdin()
  log(`ready in ${Math.round(performance.now() - t0)} ms (pid ${process.pid}; ${watching ? 'stops when stdin closes, ' : ''}stops on SIGINT/SIGTERM)`)
  fs.writeSync(1, JSON.stringify(ready) + '\n')
}

main().catch((err) => {
  log(`startup failed: ${err?.stack ?? err}`)
  void shutdown('startup failed', 1)
})
