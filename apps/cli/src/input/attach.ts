// `@path` in a message attaches that file: its text goes with the message, after
// what was typed, so the model reads it without a tool call. Within budgets: a
// file over `maxBytes`, or past `maxTotalBytes` for the message, a folder and a
// binary file are not attached, and a path the tools may not read (the deny-read
// list of @loom/tools: credential stores, the deployment's denyRead) is refused;
// each with a note for the person typing. A word that names no file (`@alice`)
// is left as it is.
import { readFile, realpath, stat } from 'node:fs/promises'
import { resolve } from 'node:path'
import { describeBytes } from '../present/diff.ts'
import { expandHome } from './complete.ts'

export interface AttachOptions {
  /** The folder relative paths start from. */
  cwd: string
  /** Why tools may not read `path` (absolute, links resolved), or undefined when they may. */
  denied: (path: string) => string | undefined
  /** Bytes one attached file may have (as `read` returns at most). */
  maxBytes?: number
  /** Bytes the attachments of one message may have together. */
  maxTotalBytes?: number
}

export interface Attached {
  /** As typed after the `@`. */
  path: string
  bytes: number
  lines: number
}

export interface Attachments {
  /** The message with the attached files after it. */
  text: string
  attached: Attached[]
  /** One line per mention not attached, saying why. */
  notes: string[]
}

export const ATTACH_MAX_BYTES = 51_200
export const ATTACH_MAX_TOTAL_BYTES = 204_800

/** The mentions of `text`: `@` at the start of a word, and what follows it up to a space. */
export function mentions(text: string): string[] {
  const found: string[] = []
  for (const match of text.matchAll(/(?:^|\s)@(\S+)/g)) if (!found.includes(match[1])) found.push(match[1])
  return found
}

export async function attachMentions(text: string, options: AttachOptions): Promise<Attachments> {
  const maxBytes = options.maxBytes ?? ATTACH_MAX_BYTES
  const maxTotal = options.maxTotalBytes ?? ATTACH_MAX_TOTAL_BYTES
  const attached: Attached[] = []
  const blocks: string[] = []
  const notes: string[] = []
  let total = 0
  for (const mention of mentions(text)) {
    const found = await locate(mention, options.cwd)
    if (!found) continue
    const { path, file } = found
    const refuse = (why: string) => notes.push(`@${path} is not attached: ${why}`)
    const denial = options.denied(file)
    if (denial) {
      refuse(`tools may not read it (${denial})`)
      continue
    }
    const stats = await stat(file)
    if (stats.isDirectory()) {
      refuse('it is a folder (name a file in it)')
      continue
    }
    if (stats.size > maxBytes) {
      refuse(`${describeBytes(stats.size)} is more than the ${describeBytes(maxBytes)} a file may have; the model can read it in parts with the read tool`)
      continue
    }
    if (total + stats.size > maxTotal) {
      refuse(`the files of one message may have ${describeBytes(maxTotal)} together, and the ones before it have ${describeBytes(total)}`)
      continue
    }
    const data = await readFile(file)
    if (data.subarray(0, 8000).includes(0)) {
      refuse('it is a binary file')
      continue
    }
    const content = data.toString('utf8')
    total += data.length
    const lines = content === '' ? 0 : content.split('\n').length - (content.endsWith('\n') ? 1 : 0)
    attached.push({ path, bytes: data.length, lines })
    blocks.push(`<attached-file path="${path}">\n${content}${content.endsWith('\n') || content === '' ? '' : '\n'}</attached-file>`)
  }
  return { text: blocks.length ? `${text}\n\n${blocks.join('\n\n')}` : text, attached, notes }
}

/**
 * The file a mention names, links resolved: the mention as typed, else without
 * trailing punctuation (`see @notes.txt.`); undefined when neither exists.
 */
async function locate(mention: string, cwd: string): Promise<{ path: string; file: string } | undefined> {
  const trimmed = mention.replace(/[.,;:!?)\]}'"]+$/, '')
  for (const path of trimmed && trimmed !== mention ? [mention, trimmed] : [mention]) {
    try {
      return { path, file: await realpath(resolve(cwd, expandHome(path))) }
    } catch {
      // not a file here: perhaps without the punctuation
    }
  }
  return undefined
}
