// Provenance and cache-break attribution of request headers: which plugin
// contributed which section and tool (with digests and package versions), and,
// when a header changes, what changed and where the serialized prefix diverges.
import { createHash } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import type { ToolSchema } from '@loom/llm'
import {
  serializeRequest,
  type PluginDrift,
  type RequestHeader,
  type RequestHeaderChanges,
  type RequestSourceChange,
  type RequestSectionSource,
  type RequestSourceEntry,
  type RequestSourcePlugin,
  type RequestSources,
} from '@loom/session'
import { estimateText } from '@loom/llm'
import { defaultTrust, renderAssembly, type PromptAssembly } from '@loom/system-prompt'
import { inOrder } from './manifest.ts'
import type { PluginIdentity } from './identity.ts'

export function sha256(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex')
}

/**
 * The sources of a header built from `assembly`: every section that reaches the
 * system text (rendered text not empty) and every tool, in request order, each with
 * its owner and the sha256 of its rendered text / its JSON schema
 * (`JSON.stringify({ name, description, parameters })`, the bytes the request
 * carries); and per owner plugin (sorted by name) a digest of what it contributed
 * and what `identify` says of it (by default its package version, when found).
 */
export function promptSources(assembly: PromptAssembly, identify: IdentifyPlugin = byVersion): RequestSources {
  const rendered = renderAssembly(assembly).sections
  const sections: RequestSectionSource[] = []
  assembly.sections.forEach((section, i) => {
    const { text, sha256 } = rendered[i]
    if (text === '') return
    const declared = assembly.attribution?.sections[section.name]
    sections.push({
      name: section.name,
      owner: section.owner,
      sha256,
      order: section.order,
      stability: section.stability,
      chars: text.length,
      tokens: estimateText(text),
      trust: declared?.trust ?? defaultTrust(section.owner),
      category: declared?.category ?? 'instructions',
      ...(declared?.source && { sourceHash: declared.source.sha256 }),
      ...(declared?.source?.modifiedAt !== undefined && { modifiedAt: declared.source.modifiedAt }),
    })
  })
  const tools = assembly.tools.map(
    ({ name, description, parameters, owner }): RequestSourceEntry => ({
      name,
      owner,
      sha256: sha256(JSON.stringify({ name, description, parameters } satisfies ToolSchema)),
    }),
  )
  const leftOut = (assembly.omitted ?? []).filter(o => o.kind === 'section' && o.over !== 'self').map(o => o.name)
  return { sections, tools, plugins: pluginSources(sections, tools, identify), ...(leftOut.length && { leftOut }) }
}

/** What identifies plugin `name` for drift (the agent loop's `pluginIdentity` adds the source hash of unpublished code). */
export type IdentifyPlugin = (name: string) => PluginIdentity

const byVersion: IdentifyPlugin = name => {
  const version = packageVersion(name)
  return version === undefined ? {} : { version }
}

/**
 * One row per owner, with its identity: `digest` is the sha256 of
 * `JSON.stringify({ sections: [[name, sha256]…], tools: [[name, sha256]…] })` over
 * that owner's entries in request order.
 */
export function pluginSources(
  sections: readonly RequestSourceEntry[],
  tools: readonly RequestSourceEntry[],
  identify: IdentifyPlugin = byVersion,
): RequestSourcePlugin[] {
  const owners = new Map<string, { sections: [string, string][]; tools: [string, string][] }>()
  const of = (owner: string) => {
    let entry = owners.get(owner)
    if (!entry) owners.set(owner, (entry = { sections: [], tools: [] }))
    return entry
  }
  for (const section of sections) of(section.owner).sections.push([section.name, section.sha256])
  for (const tool of tools) of(tool.owner).tools.push([tool.name, tool.sha256])
  return [...owners.keys()].sort(compare).map(name => {
    const { version, sourceHash } = identify(name)
    return {
      name,
      ...(version !== undefined && { version }),
      ...(sourceHash !== undefined && { sourceHash }),
      digest: sha256(JSON.stringify(owners.get(name))),
    }
  })
}

/**
 * The drift from `before` (a logged header's plugins) to `after` (the deployment's
 * now); `undefined` when there is none. A plugin on both sides is `upgraded` when
 * its version differs, else `changed` when both sides have a source hash and they
 * differ (an edited plugin loaded by path or workspace package); what it
 * contributes (its digest) is no drift: that is the header change's to attribute.
 */
export function pluginDrift(before: readonly RequestSourcePlugin[], after: readonly RequestSourcePlugin[]): PluginDrift | undefined {
  const was = new Map(before.map(plugin => [plugin.name, plugin]))
  const now = new Map(after.map(plugin => [plugin.name, plugin]))
  const kept = after.filter(plugin => was.has(plugin.name)).map(plugin => [was.get(plugin.name)!, plugin] as const)
  const changed = kept.flatMap(([from, to]) =>
    from.version === to.version && from.sourceHash !== undefined && to.sourceHash !== undefined && from.sourceHash !== to.sourceHash
      ? [{ name: to.name, ...(to.version !== undefined && { version: to.version }), from: from.sourceHash, to: to.sourceHash }]
      : [],
  )
  const drift: PluginDrift = {
    added: after.filter(plugin => !was.has(plugin.name)),
    removed: before.filter(plugin => !now.has(plugin.name)),
    upgraded: kept
      .filter(([from, to]) => from.version !== to.version)
      .map(([{ version: from }, { name, version: to }]) => ({ name, ...(from !== undefined && { from }), ...(to !== undefined && { to }) })),
    changed,
  }
  return drift.added.length || drift.removed.length || drift.upgraded.length || changed.length ? drift : undefined
}

/**
 * The serialized prefix of a header: the start of the request serialization that
 * prefix reuse measures (`serializeRequest` of @loom/session: tools, then system
 * text, one JSON value per line), so a break's offset and the reuse figures of
 * `loom sessions stats` speak of the same bytes.
 */
export function serializedPrefix(header: RequestHeader): string {
  return serializeRequest({ header, messages: [] })
}

/** UTF-8 byte offset of the first difference of two texts; `undefined` when equal. */
export function firstDifference(a: string, b: string): number | undefined {
  if (a === b) return undefined
  const x = Buffer.from(a, 'utf8')
  const y = Buffer.from(b, 'utf8')
  const n = Math.min(x.length, y.length)
  for (let i = 0; i < n; i++) if (x[i] !== y[i]) return i
  return n
}

/**
 * What changed from `before` to `after`. Sections and tools are compared by name
 * against the previous header's sources (empty lists when it has none): a new name
 * is `added`, a vanished one `removed`, a different digest or owner, or a changed
 * position relative to the others, `changed`.
 */
export function headerChanges(
  before: { header: RequestHeader; sources?: RequestSources },
  after: { header: RequestHeader; sources?: RequestSources },
): RequestHeaderChanges {
  const known = before.sources !== undefined && after.sources !== undefined
  const offset = firstDifference(serializedPrefix(before.header), serializedPrefix(after.header))
  const sections = known ? budgetCauses(diffEntries(before.sources!.sections, after.sources!.sections), before.sources!, after.sources!) : []
  const resized = known && sections.some(change => change.byBudget) ? resizedSections(before.sources!.sections, after.sources!.sections) : []
  return {
    sections,
    tools: known ? diffEntries(before.sources!.tools, after.sources!.tools) : [],
    config: configChanges(before.header, after.header),
    ...(resized.length && { resized }),
    ...(offset !== undefined && { firstDifference: offset }),
  }
}

/** A section the budgets left out (or let back in) is the budget's doing, not its plugin's. */
function budgetCauses(changes: RequestSourceChange[], before: RequestSources, after: RequestSources): RequestSourceChange[] {
  const outNow = new Set(after.leftOut ?? [])
  const outBefore = new Set(before.leftOut ?? [])
  return changes.map(change =>
    (change.change === 'removed' && outNow.has(change.name)) || (change.change === 'added' && outBefore.has(change.name))
      ? { ...change, byBudget: true }
      : change,
  )
}

/** Sections on both sides whose rendered size changed: what made the budget move. */
function resizedSections(before: readonly RequestSectionSource[], after: readonly RequestSectionSource[]) {
  const was = new Map(before.map(section => [section.name, section]))
  return after.flatMap(section => {
    const from = was.get(section.name)?.chars
    return from !== undefined && section.chars !== undefined && from !== section.chars
      ? [{ name: section.name, owner: section.owner, fromChars: from, toChars: section.chars }]
      : []
  })
}

function diffEntries(before: readonly RequestSourceEntry[], after: readonly RequestSourceEntry[]): RequestSourceChange[] {
  const was = new Map(before.map(entry => [entry.name, entry]))
  const now = new Map(after.map(entry => [entry.name, entry]))
  const keptBefore = before.filter(entry => now.has(entry.name)).map(entry => entry.name)
  const keptAfter = after.filter(entry => was.has(entry.name)).map(entry => entry.name)
  // Moved: out of order relative to the others, not merely shifted by an entry that came or went.
  const inPlace = inOrder(keptBefore, keptAfter)
  const moved = new Set(keptAfter.filter(name => !inPlace.has(name)))
  const changes: RequestSourceChange[] = []
  for (const entry of after) {
    const old = was.get(entry.name)
    if (!old) changes.push({ name: entry.name, owner: entry.owner, change: 'added' })
    else if (old.sha256 !== entry.sha256 || old.owner !== entry.owner || moved.has(entry.name)) {
      changes.push({ name: entry.name, owner: entry.owner, change: 'changed' })
    }
  }
  for (const entry of before) if (!now.has(entry.name)) changes.push({ name: entry.name, owner: entry.owner, change: 'removed' })
  return changes
}

function configChanges(before: RequestHeader, after: RequestHeader): string[] {
  const keys: string[] = []
  const differ = (a: unknown, b: unknown) => JSON.stringify(a) !== JSON.stringify(b)
  const configA = before.config as unknown as Record<string, unknown>
  const configB = after.config as unknown as Record<string, unknown>
  for (const key of new Set([...Object.keys(configA), ...Object.keys(configB)])) {
    if (differ(configA[key], configB[key])) keys.push(key)
  }
  const defaultsA = (before.adapterDefaults ?? {}) as Record<string, unknown>
  const defaultsB = (after.adapterDefaults ?? {}) as Record<string, unknown>
  for (const key of new Set([...Object.keys(defaultsA), ...Object.keys(defaultsB)])) {
    if (differ(defaultsA[key], defaultsB[key])) keys.push(`adapterDefaults.${key}`)
  }
  return keys
}

const PACKAGE_NAME = /^(?:@[a-z0-9-~][a-z0-9-._~]*\/)?[a-z0-9-~][a-z0-9-._~]*$/
const versions = new Map<string, string | undefined>()

/**
 * The version of package `name` as installed, best effort: resolved from the
 * process's working directory, then from the program's entry script (the CLI
 * depends on every first-party plugin), then from this package; `undefined` when
 * the name is not a package name or nothing is found. Cached per name and working directory.
 */
export function packageVersion(name: string): string | undefined {
  if (!PACKAGE_NAME.test(name)) return undefined
  const key = `${process.cwd()}\0${name}`
  if (versions.has(key)) return versions.get(key)
  let version: string | undefined
  const entry = process.argv[1] ? [process.argv[1]] : []
  for (const base of [join(process.cwd(), 'noop.js'), ...entry, import.meta.url]) {
    version = versionFrom(createRequire(base), name)
    if (version !== undefined) break
  }
  versions.set(key, version)
  return version
}

function versionFrom(require: NodeJS.Require, name: string): string | undefined {
  // node_modules/<name>/package.json along the lookup paths: no `exports` map can hide it.
  for (const dir of require.resolve.paths(name) ?? []) {
    const file = join(dir, name, 'package.json')
    try {
      const version = existsSync(file) ? readVersion(file, name) : undefined
      if (version !== undefined) return version
    } catch {
      /* unreadable: keep looking */
    }
  }
  try {
    return readVersion(require.resolve(`${name}/package.json`), name)
  } catch {
    /* not exported: find it from the entry point */
  }
  try {
    let dir = dirname(require.resolve(name))
    for (;;) {
      const file = join(dir, 'package.json')
      if (existsSync(file)) {
        const version = readVersion(file, name)
        if (version !== undefined) return version
      }
      const parent = dirname(dir)
      if (parent === dir) return undefined
      dir = parent
    }
  } catch {
    return undefined
  }
}

function readVersion(file: string, name: string): string | undefined {
  const manifest = JSON.parse(readFileSync(file, 'utf8')) as { name?: unknown; version?: unknown }
  return manifest.name === name && typeof manifest.version === 'string' ? manifest.version : undefined
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0
}
