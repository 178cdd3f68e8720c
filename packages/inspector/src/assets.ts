// The page's files: its own (page/ beside src/ and dist/) and the libraries it
// imports, served from this package's dependencies as installed, so the page
// works offline and nothing is fetched from a CDN. Each file is read and
// compressed once, on first request.
import { createHash } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, extname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { gzipSync } from 'node:zlib'

export interface Asset {
  type: string
  body: Buffer
  gzip: Buffer
  etag: string
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
}

/** The page's own folder. */
export const PAGE_DIR = fileURLToPath(new URL('../page/', import.meta.url))

/**
 * The library files the page imports, by the name it imports them under
 * (`assets/vendor/<name>`). Resolved from this module, as Node would resolve its
 * own imports of them; htm and uPlot are found beside their CommonJS entry.
 */
function vendorFiles(): Record<string, string> {
  const require = createRequire(import.meta.url)
  const htm = dirname(require.resolve('htm'))
  const uplot = dirname(require.resolve('uplot'))
  return {
    'preact.mjs': require.resolve('preact'),
    'hooks.mjs': require.resolve('preact/hooks'),
    'htm.mjs': join(htm, 'htm.module.js'),
    'uplot.mjs': join(uplot, 'uPlot.esm.js'),
    'uplot.css': join(uplot, 'uPlot.min.css'),
  }
}

/** Every asset path (relative to `assets/`) and the file it is read from. */
export function assetFiles(): Map<string, string> {
  const files = new Map<string, string>()
  for (const name of readdirSync(PAGE_DIR)) if (name !== 'index.html' && TYPES[extname(name)]) files.set(name, join(PAGE_DIR, name))
  for (const [name, file] of Object.entries(vendorFiles())) files.set(`vendor/${name}`, file)
  return files
}

/** Reads and compresses files on first use. */
export class AssetStore {
  private readonly files: Map<string, string>
  private readonly loaded = new Map<string, Asset>()

  constructor(files = assetFiles()) {
    this.files = files
  }

  names(): string[] {
    return [...this.files.keys()]
  }

  get(name: string): Asset | undefined {
    const cached = this.loaded.get(name)
    if (cached) return cached
    const file = this.files.get(name)
    if (file === undefined) return undefined
    const asset = assetOf(readFileSync(file), TYPES[extname(file)] ?? 'application/octet-stream')
    this.loaded.set(name, asset)
    return asset
  }
}

export function assetOf(body: Buffer, type: string): Asset {
  return { type, body, gzip: gzipSync(body, { level: 9 }), etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"` }
}

/**
 * The page (index.html) and its Content-Security-Policy: scripts from this
 * server only, the inline import map allowed by its hash.
 */
export function pageDocument(): { asset: Asset; csp: string } {
  const html = readFileSync(join(PAGE_DIR, 'index.html'), 'utf8')
  const importMap = /<script type="importmap">([\s\S]*?)<\/script>/.exec(html)?.[1]
  if (importMap === undefined) throw new Error(`@loom/inspector: ${join(PAGE_DIR, 'index.html')} has no import map`)
  const hash = createHash('sha256').update(importMap).digest('base64')
  const csp = [
    "default-src 'self'",
    `script-src 'self' 'sha256-${hash}'`,
    // uPlot and the bars size their parts with style attributes.
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "frame-ancestors 'none'",
    "base-uri 'self'",
    "form-action 'self'",
  ].join('; ')
  return { asset: assetOf(Buffer.from(html), TYPES['.html']), csp }
}
