/**
 * Shape checks for events entering a log, live or restored. A log is the proof of
 * what a model saw, so an event the projections cannot read is refused at the door
 * rather than discovered at resume.
 */
// A switch rather than a Set: it runs for every key of every restored event.
function isEnvelopeKey(key: string): boolean {
  switch (key) {
    case 'type':
    case 'seq':
    case 'time':
    case 'data':
    case 'surfaceOp':
    case 'sourceEventSeqs':
    case 'ignorable':
      return true
    default:
      return false
  }
}

type Record_ = Record<string, unknown>
const isRecord = (value: unknown): value is Record_ => typeof value === 'object' && value !== null && !Array.isArray(value)
const nonEmpty = (value: unknown): value is string => typeof value === 'string' && value !== ''

/** Problems with the envelope of a stored event (seq contiguity is checked by the caller). */
export function envelopeProblem(event: unknown): string | undefined {
  if (!isRecord(event)) return 'is not an object'
  // for-in allocates no key array: this runs for every event of a restored log.
  for (const key in event) {
    if (isEnvelopeKey(key)) continue
    const extra = Object.keys(event).filter(key => !isEnvelopeKey(key))
    return `has unknown envelope keys ${extra.join(', ')}`
  }
  if (!nonEmpty(event.type)) return 'has no type'
  if (!Number.isSafeInteger(event.seq) || (event.seq as number) < 0) return 'has an invalid seq'
  if (!Number.isSafeInteger(event.time)) return 'has an invalid time'
  if (!('data' in event)) return 'has no data'
  if (event.ignorable !== undefined && event.ignorable !== true) return 'has an invalid ignorable marker'
  return undefined
}

/** Problems with the data of the event types whose readers depend on their shape. */
export function dataProblem(type: string, data: unknown): string | undefined {
  switch (type) {
    case 'request/header-delta':
      return 'uses the unsupported legacy request/header-delta format'
    case 'request/header':
      return headerProblem(data)
    case 'user/message':
      return messageProblem(data, 'user')
    case 'assistant/message': {
      if (!isRecord(data)) return 'data is not an object'
      const problem = messageProblem(data.message, 'assistant')
      if (problem) return problem
      const source = (data.message as Record_).source as Record_
      if (source.kind !== 'model' || !nonEmpty(source.provider) || !nonEmpty(source.model)) {
        return 'message source must be {kind: "model"} with a provider and a model'
      }
      return undefined
    }
    case 'tool/result': {
      if (!isRecord(data)) return 'data is not an object'
      const problem = messageProblem(data.message, 'user')
      if (problem) return problem
      const message = data.message as Record_
      const source = message.source as Record_
      const content = message.content as unknown[]
      if (source.kind !== 'tool' || !nonEmpty(source.callId)) return 'message source must be {kind: "tool", callId}'
      const block = content[0]
      if (content.length !== 1 || !isRecord(block) || block.type !== 'tool-result') return 'message must hold exactly one tool-result block'
      if (block.toolCallId !== source.callId) return 'tool-result block toolCallId must equal source.callId'
      if (!Array.isArray(block.content)) return 'tool-result block content must be an array'
      return undefined
    }
    default:
      return undefined
  }
}

function messageProblem(message: unknown, role: 'user' | 'assistant'): string | undefined {
  if (!isRecord(message)) return 'message is not an object'
  if (!nonEmpty(message.id)) return 'message id must be a non-empty string'
  if (message.role !== role) return `message role must be "${role}"`
  if (!isRecord(message.source) || !nonEmpty(message.source.kind)) return 'message source must have a kind'
  if (!Array.isArray(message.content)) return 'message content must be an array'
  return undefined
}

function headerProblem(data: unknown): string | undefined {
  if (!isRecord(data) || !isRecord(data.header)) return 'data must carry a header'
  if (data.reason === 'fallback') return 'uses the unsupported request/header reason "fallback"'
  const { config, adapterDefaults } = data.header
  if (!isRecord(config) || !nonEmpty(config.provider) || !nonEmpty(config.model)) {
    return 'header config needs a non-empty provider and model'
  }
  if (config.reasoningEffort !== undefined && !nonEmpty(config.reasoningEffort)) return 'header reasoningEffort must be a non-empty string'
  if (adapterDefaults === undefined) return undefined
  if (!isRecord(adapterDefaults)) return 'header adapterDefaults must be an object'
  for (const [key, value] of Object.entries(adapterDefaults)) {
    if ((key !== 'reasoningEffort' && key !== 'maxTokens') || value !== true || config[key] === undefined) {
      return `header adapterDefaults.${key} is invalid`
    }
  }
  return undefined
}
