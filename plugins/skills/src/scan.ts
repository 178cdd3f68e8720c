import { readdirSync, readFileSync, statSync } from 'node:fs'
import { createRequire } from 'node:module'
import { isAbsolute, join, relative, resolve, sep } from 'node:path'

// The YAML parser (about 70 modules) loads with the first SKILL.md, not with the
// plugin: a project without skills never pays for it.
const require = createRequire(import.meta.url)
// The parser copies an alias's node at every use: past this many alias uses (nested
// ones counted by what they repeat) a front matter is refused, so an alias bomb in a
// SKILL.md is a skipped skill, not a process out of memory. (A SKILL.md is also
// capped in bytes: `maxSkillBytes`.)
const MAX_ALIAS_COUNT = 100
const parseYaml = (text: string): unknown => (require('yaml') as typeof import('yaml')).parse(text, { maxAliasCount: MAX_ALIAS_COUNT })

/** One usable skill. */
export interface Skill {
  readonly name: string
  /** One line: whitespace collapsed. */
  readonly description: string
  /** SKILL.md without its front matter. */
  readonly body: string
  /** Absolute path of the SKILL.md. */
  readonly file: string
  /** Absolute path of the skill's directory. */
  readonly dir: string
}

export type ParsedSkill = { ok: true; skill: Skill } | { ok: false; reason: string }

export const MAX_NAME_LENGTH = 64
export const MAX_DESCRIPTION_LENGTH = 1024

const FRONT_MATTER = /^---[ \t]*\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|$)/
const utf8 = new TextDecoder('utf-8', { fatal: true })

function errorCode(error: unknown): string {
  const code = (error as NodeJS.ErrnoException | undefined)?.code
  return typeof code === 'string' ? code : error instanceof Error ? error.message : String(error)
}

/** Parses a SKILL.md: YAML front matter with a `name` and a `description`, then the body. */
export function parseSkill(text: string, file: string, dir: string): ParsedSkill {
  const source = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text
  const match = FRONT_MATTER.exec(source)
  if (!match) return { ok: false, reason: 'has no front matter (a leading "---" block with `name` and `description`)' }
  let data: unknown
  try {
    data = parseYaml(match[1])
  } catch (error) {
    // Line numbers of the file, not of the front matter (which starts on line 2).
    const message = (error instanceof Error ? error.message : String(error))
      .split('\n')[0]
      .replace(/ at line (\d+)/, (_, line: string) => ` at line ${Number(line) + 1} of the file`)
      .replace(/:$/, '')
    const hint = /nested mappings|mapping values/i.test(message) ? ' (quote a value that contains ": ")' : ''
    return { ok: false, reason: `has front matter that is not valid YAML: ${message}${hint}` }
  }
  if (data === null || typeof data !== 'object' || Array.isArray(data)) {
    return { ok: false, reason: 'has front matter that is not a mapping of `name` and `description`' }
  }
  const { name, description } = data as Record<string, unknown>
  if (typeof name !== 'string' || name.trim() === '') return { ok: false, reason: 'has no `name` (a non-empty string) in its front matter' }
  if (/[\r\n]/.test(name.trim()) || name.trim().length > MAX_NAME_LENGTH) {
    return { ok: false, reason: `has a \`name\` that is not one line of at most ${MAX_NAME_LENGTH} characters` }
  }
  if (typeof description !== 'string' || description.trim() === '') {
    return { ok: false, reason: 'has no `description` (a non-empty string) in its front matter' }
  }
  const oneLine = description.trim().replace(/\s+/g, ' ')
  if (oneLine.length > MAX_DESCRIPTION_LENGTH) {
    return { ok: false, reason: `has a \`description\` of ${oneLine.length} characters (at most ${MAX_DESCRIPTION_LENGTH})` }
  }
  const body = source
    .slice(match[0].length)
    .replace(/^(?:[ \t]*\r?\n)+/, '')
    .replace(/\s+$/, '')
  return { ok: true, skill: { name: name.trim(), description: oneLine, body, file, dir } }
}

interface CacheEntry {
  stamp: string
  parsed: ParsedSkill
}

/** The skills found in some directories, and the files skipped with the reason. */
export interface ScanResult {
  readonly skills: readonly Skill[]
  readonly skipped: readonly { file: string; reason: string }[]
}

/**
 * Finds `<dir>/*\/SKILL.md` in each skills directory. Parsed files are cached by
 * path and version (mtime, size, inode), so a scan costs a directory listing and
 * one `stat` per skill; `warn` is called once per version of a file that is skipped.
 */
export class SkillScanner {
  private readonly maxSkillBytes: number
  private readonly warn: (message: string) => void
  private readonly cache = new Map<string, CacheEntry>()

  constructor(maxSkillBytes: number, warn: (message: string) => void) {
    this.maxSkillBytes = maxSkillBytes
    this.warn = warn
  }

  scan(dirs: readonly string[]): ScanResult {
    const byName = new Map<string, Skill>()
    const skipped: { file: string; reason: string }[] = []
    for (const dir of dirs) {
      let entries: string[]
      try {
        entries = readdirSync(dir).sort()
      } catch {
        continue // a missing (or unreadable) skills directory has no skills
      }
      for (const entry of entries) {
        const file = join(dir, entry, 'SKILL.md')
        const parsed = this.load(file, join(dir, entry))
        if (!parsed) continue
        if (!parsed.ok) {
          skipped.push({ file, reason: parsed.reason })
          continue
        }
        const earlier = byName.get(parsed.skill.name)
        if (earlier) {
          const reason = `has the skill name "${parsed.skill.name}" already used by ${earlier.file}`
          skipped.push({ file, reason })
          this.warnOnce(file, `duplicate:${earlier.file}`, reason)
          continue
        }
        byName.set(parsed.skill.name, parsed.skill)
      }
    }
    const skills = [...byName.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    return { skills, skipped }
  }

  clear(): void {
    this.cache.clear()
  }

  private readonly warned = new Set<string>()

  private warnOnce(file: string, stamp: string, reason: string) {
    const key = `${file}\0${stamp}`
    if (this.warned.has(key)) return
    if (this.warned.size >= 1024) this.warned.clear()
    this.warned.add(key)
    this.warn(`skill file ${file} skipped: it ${reason}`)
  }

  /** `undefined` when there is no SKILL.md (not a skill directory). */
  private load(file: string, dir: string): ParsedSkill | undefined {
    let stats
    try {
      stats = statSync(file, { bigint: true, throwIfNoEntry: false })
    } catch (error) {
      if (errorCode(error) === 'ENOTDIR' || errorCode(error) === 'ENOENT') return undefined
      const parsed: ParsedSkill = { ok: false, reason: `could not be read (${errorCode(error)})` }
      this.warnOnce(file, 'stat', parsed.reason)
      return parsed
    }
    if (!stats || !stats.isFile()) return undefined
    const stamp = `${stats.mtimeNs}:${stats.size}:${stats.ino}`
    const cached = this.cache.get(file)
    if (cached?.stamp === stamp) return cached.parsed
    const parsed = this.read(file, dir, Number(stats.size))
    if (!parsed.ok) this.warnOnce(file, stamp, parsed.reason)
    if (this.cache.size >= 1024) this.cache.clear()
    this.cache.set(file, { stamp, parsed })
    return parsed
  }

  private read(file: string, dir: string, size: number): ParsedSkill {
    if (size > this.maxSkillBytes) return { ok: false, reason: `is ${size} bytes, more than the ${this.maxSkillBytes}-byte limit for skill files` }
    let buffer: Buffer
    try {
      buffer = readFileSync(file)
    } catch (error) {
      return { ok: false, reason: `could not be read (${errorCode(error)})` }
    }
    let text: string
    try {
      if (buffer.includes(0)) throw new Error('NUL byte')
      text = utf8.decode(buffer)
    } catch {
      return { ok: false, reason: 'is not UTF-8 text (binary content)' }
    }
    return parseSkill(text, file, dir)
  }
}

/** The skills directories for a workspace root: relative entries resolve against it, absolute ones stay. */
export function resolveDirs(root: string, dirs: readonly string[]): string[] {
  return [...new Set(dirs.map(dir => (isAbsolute(dir) ? dir : resolve(root, dir))))]
}

/** A path as shown to the model: relative to the workspace root when inside it, else absolute. */
export function displayPath(root: string, path: string): string {
  const rel = relative(root, path)
  if (rel === '' || rel === '..' || rel.startsWith(`..${sep}`) || isAbsolute(rel)) return path
  return rel.split(sep).join('/')
}
