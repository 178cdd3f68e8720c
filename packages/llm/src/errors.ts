import type { LlmFailure } from './types.ts'

/**
 * The codes a model call can fail with. Adapters map transport and provider
 * answers onto these, so retry policies and users see one vocabulary.
 */
export const LLM_ERROR_CODES = {
  AUTH: 'the provider refused the credentials',
  MISSING_CREDENTIAL: 'no API key is configured',
  RATE_LIMIT: 'the provider is rate limiting',
  QUOTA: 'the account has no quota left',
  CONTEXT_OVERFLOW: 'the request is larger than the model context window',
  BAD_REQUEST: 'the provider rejected the request',
  SERVER: 'the provider failed',
  SERVICE_UNAVAILABLE: 'the provider is overloaded or down',
  TIMEOUT: 'the stream went idle for too long',
  NETWORK: 'the connection failed or was reset',
  UNREACHABLE: "the provider's address cannot be reached: connection refused, no such host, or a certificate that is not trusted",
  PROTOCOL: 'the provider answered with something that is not the protocol',
  EMPTY_RESPONSE: 'the provider answered with nothing',
  RESPONSE_TOO_LARGE: "the answer outgrew the route's response limit",
  ABORTED: 'the call was aborted',
  NO_ADAPTER: 'no adapter serves this provider',
  DUPLICATE_ADAPTER: 'a provider route is already registered',
  INVALID_PREPARED_CALL: 'a prepared call was misused',
  UNSUPPORTED_REASONING_EFFORT: 'the model does not offer this reasoning effort',
  UNKNOWN: 'an unclassified failure',
} as const

export type LlmErrorCode = keyof typeof LLM_ERROR_CODES

/** An error with a stable machine-readable code. */
export class HarnessError extends Error {
  readonly code: string

  constructor(message: string, code: string, options?: ErrorOptions) {
    super(message, options)
    this.code = code
    this.name = new.target.name
  }
}

export interface LlmErrorDetails {
  status?: number
  providerRetryAfterMs?: number
  requestId?: string
  cause?: unknown
}

/** A model-call failure; `failure` is the frozen JSON form that goes into the log. */
export class LlmError extends HarnessError {
  readonly failure: LlmFailure

  constructor(message: string, code: string, details: LlmErrorDetails = {}) {
    if (!message) throw new TypeError('LlmError needs a message')
    if (!code) throw new TypeError('LlmError needs a code')
    const { status, providerRetryAfterMs, requestId, cause } = details
    if (status !== undefined && !(Number.isInteger(status) && status >= 100 && status <= 599)) {
      throw new TypeError(`LlmError status must be an HTTP status, got ${status}`)
    }
    if (providerRetryAfterMs !== undefined && !(Number.isFinite(providerRetryAfterMs) && providerRetryAfterMs > 0)) {
      throw new TypeError(`LlmError providerRetryAfterMs must be positive, got ${providerRetryAfterMs}`)
    }
    if (requestId !== undefined && !requestId) throw new TypeError('LlmError requestId must not be empty')
    super(message, code, cause === undefined ? undefined : { cause })
    this.failure = Object.freeze({
      message,
      code,
      ...(status !== undefined && { status }),
      ...(providerRetryAfterMs !== undefined && { providerRetryAfterMs }),
      ...(requestId !== undefined && { requestId }),
    })
  }
}

/**
 * One line for any thrown value: the message (or name), aggregate members in
 * brackets, then the cause chain. Never throws, whatever it is given.
 */
export function errorChain(value: unknown): string {
  const seen = new Set<unknown>()
  const render = (item: unknown): string => {
    try {
      if (seen.has(item)) return '<circular cause>'
      if (item instanceof Error) {
        seen.add(item)
        let text = item.message || item.name
        if (item instanceof AggregateError && item.errors.length) text += ` [${item.errors.map(render).join('; ')}]`
        if (item.cause !== undefined) {
          const cause = render(item.cause)
          if (cause !== text) text += `: ${cause}`
        }
        return text
      }
      if (typeof item === 'object' && item !== null && typeof (item as { message?: unknown }).message === 'string' && Object.hasOwn(item, 'message')) {
        return (item as { message: string }).message
      }
      return String(item)
    } catch {
      return '<unrenderable value>'
    }
  }
  return render(value)
}

/** The failure to log for any thrown value. Never throws, whatever it is given. */
export function toFailure(error: unknown): LlmFailure {
  try {
    if (error instanceof LlmError) return error.failure
    if (error instanceof Error) {
      const own = ownFailure(error)
      if (own) return own
      return { message: error.message || 'LLM adapter failed', code: error instanceof HarnessError && error.code ? error.code : 'UNKNOWN' }
    }
    return { message: String(error), code: 'UNKNOWN' }
  } catch {
    return { message: 'LLM adapter failed', code: 'UNKNOWN' }
  }
}

/**
 * The `failure` an error carries as its own property, when it is a valid failure
 * whose code is the error's own `code` (an LlmError from another copy of this
 * package, or a hand-built one): used verbatim.
 */
function ownFailure(error: Error): LlmFailure | undefined {
  if (!Object.hasOwn(error, 'failure') || !Object.hasOwn(error, 'code')) return undefined
  const failure = (error as { failure?: unknown }).failure as Partial<Record<keyof LlmFailure, unknown>> | null
  if (typeof failure !== 'object' || failure === null) return undefined
  const { message, code, status, providerRetryAfterMs, requestId } = failure
  if (typeof message !== 'string' || !message || typeof code !== 'string' || !code) return undefined
  if (code !== (error as { code?: unknown }).code) return undefined
  if (status !== undefined && !(Number.isInteger(status) && (status as number) >= 100 && (status as number) <= 599)) return undefined
  if (providerRetryAfterMs !== undefined && !(Number.isFinite(providerRetryAfterMs) && (providerRetryAfterMs as number) > 0)) return undefined
  if (requestId !== undefined && !(typeof requestId === 'string' && requestId)) return undefined
  return failure as LlmFailure
}
