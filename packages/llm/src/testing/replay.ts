import { readFileSync } from 'node:fs'
import type { ContentBlock, TokenUsage } from '../index.ts'

/** One recorded model answer: its content and, when logged, its usage. */
export interface RecordedResponse {
  blocks: ContentBlock[]
  usage?: TokenUsage
}

/**
 * The recorded `assistant/message` answers of a session log, in log order.
 * Line 1 (the session header) is skipped; interrupted answers (a cancelled
 * call's partial text) are skipped; packed chunk rows are ignored, since
 * assistant messages are stored verbatim.
 */
export function loadReplay(file: string): RecordedResponse[] {
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (error) {
    throw new Error(`cannot read the replay log "${file}": ${(error as Error).message}`, { cause: error })
  }
  const lines = text.split('\n')
  const responses: RecordedResponse[] = []
  lines.forEach((line, i) => {
    if (!line.trim()) return
    let record: unknown
    try {
      record = JSON.parse(line)
    } catch {
      throw new Error(`the replay log "${file}" has a line that is not JSON (line ${i + 1})`)
    }
    if (i === 0) {
      if ((record as { type?: unknown })?.type !== 'session') {
        throw new Error(`"${file}" is not a session log: its first line is not a session header`)
      }
      return
    }
    const event = record as { type?: unknown; data?: { message?: { content?: unknown }; usage?: TokenUsage; interrupted?: unknown } }
    if (event?.type !== 'assistant/message' || event.data?.interrupted === true) return
    const content = event.data?.message?.content
    if (!Array.isArray(content)) throw new Error(`the replay log "${file}" has an assistant/message without content (line ${i + 1})`)
    responses.push({ blocks: content as ContentBlock[], ...(event.data?.usage !== undefined && { usage: event.data.usage }) })
  })
  return responses
}
