// The SessionPersistence contract, run against JSONL files in a temp root.
import { persistenceContract } from '@loom/session/contract'
import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'
import { encodeHeaderLine } from '../src/format.ts'
import JsonlPersistence, { logPath } from '../src/index.ts'
import { JsonlFiles } from '../src/store.ts'

persistenceContract('JSONL', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'loom-jsonl-contract-'))
  const files = new JsonlFiles({ root, packChunks: true })
  /** A log written by hand, as a writer that crashed left it. */
  const write = (file: string, text: string) => {
    fs.mkdirSync(path.dirname(file), { recursive: true })
    fs.writeFileSync(file, text)
  }
  return {
    apply: (ctx, options) => ctx.plugin(JsonlPersistence, { root, ...options }),
    async writeRaw(header, events) {
      write(logPath(root, header.cwd, header.id), [encodeHeaderLine(header), ...events.map(event => JSON.stringify(event))].join('\n') + '\n')
    },
    async writeVersion(id, version) {
      write(
        logPath(root, '/workspace', id),
        `{"type":"session","version":${version},"id":${JSON.stringify(id)},"createdAt":1,"delegationDepth":0}\n` +
          '{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}\n',
      )
    },
    async snapshot(id) {
      const file = await files.find(id)
      return file === undefined ? undefined : fs.readFileSync(file, 'utf8')
    },
    async dispose() {
      fs.rmSync(root, { recursive: true, force: true })
    },
  }
})
