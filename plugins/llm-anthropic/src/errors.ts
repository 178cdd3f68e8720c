// Anthropic failures → LlmError codes: HTTP error answers, the `error` event of
// a 200 stream, and the redaction that keeps the API key out of every message.
import { LlmError, parseRetryAfter, requestIdOf } from '@loom/llm'

const CONTEXT_RE = /prompt is too long|context window|context length|too many (input )?tokens|exceeds? the (model'?s? )?(maximum )?context/i
const QUOTA_RE = /credit balance|billing|quota|insufficient[ _-]?(balance|funds|credits?)|payment required/i

/** What the route's error messages name as the credential to check. */
export interface CredentialHint {
  /** e.g. `ANTHROPIC_API_KEY`, or `the apiKey option`. */
  credential: string
}

interface ErrorBody {
  type: string
  message: string
  requestId?: string
}

/** `{"type":"error","error":{"type","message"},"request_id"}`, or the raw text. */
export function parseErrorBody(bodyText: string): ErrorBody {
  try {
    const json: unknown = JSON.parse(bodyText)
    if (isObject(json)) {
      const error = isObject(json.error) ? json.error : json
      const type = typeof error.type === 'string' && error.type !== 'error' ? error.type : ''
      const message = typeof error.message === 'string' ? error.message : typeof json.error === 'string' ? json.error : ''
      const requestId = typeof json.request_id === 'string' && json.request_id ? json.request_id : undefined
      if (type || message) return { type, message: truncate(message, 500), ...(requestId && { requestId }) }
    }
  } catch {
    // not JSON
  }
  return { type: '', message: truncate(bodyText.trim(), 500) }
}

/** The code of an Anthropic error `type` (HTTP body or `error` event), `undefined` when the type says nothing. */
function codeOfType(type: string, message: string): string | undefined {
  switch (type) {
    case 'authentication_error':
    case 'permission_error':
      return 'AUTH'
    case 'billing_error':
      return 'QUOTA'
    case 'rate_limit_error':
      return 'RATE_LIMIT'
    case 'overloaded_error':
      return 'SERVICE_UNAVAILABLE'
    case 'api_error':
      return 'SERVER'
    case 'timeout_error':
      return 'TIMEOUT'
    case 'request_too_large':
      return 'CONTEXT_OVERFLOW'
    case 'invalid_request_error':
    case 'not_found_error':
      return CONTEXT_RE.test(message) ? 'CONTEXT_OVERFLOW' : QUOTA_RE.test(message) ? 'QUOTA' : 'BAD_REQUEST'
    default:
      return undefined
  }
}

/**
 * A non-2xx answer → LlmError (its body already redacted by the transport).
 * 401/403 AUTH, 402 QUOTA, 429 RATE_LIMIT, 413 CONTEXT_OVERFLOW, 408 TIMEOUT,
 * 529/503 SERVICE_UNAVAILABLE, other 5xx SERVER, 400 BAD_REQUEST or
 * CONTEXT_OVERFLOW (prompt too long) or QUOTA (credit balance).
 */
export function httpError(provider: string, status: number, bodyText: string, headers: Headers, hint: CredentialHint): LlmError {
  const body = parseErrorBody(bodyText)
  const detail = body.message || body.type || `no error message`
  let code: string
  if (status === 401 || status === 403) code = 'AUTH'
  else if (status === 402 || (status !== 429 && status >= 400 && status < 500 && (body.type === 'billing_error' || QUOTA_RE.test(body.message)))) code = 'QUOTA'
  else if (status === 429) code = 'RATE_LIMIT'
  else if (status === 413 || (status >= 400 && status < 500 && CONTEXT_RE.test(body.message))) code = 'CONTEXT_OVERFLOW'
  else if (status === 408) code = 'TIMEOUT'
  else if (status === 529 || status === 503) code = 'SERVICE_UNAVAILABLE'
  else if (status >= 500) code = 'SERVER'
  else code = 'BAD_REQUEST'
  const message =
    code === 'AUTH'
      ? `${provider}: HTTP ${status}: ${detail} — check ${hint.credential} (route "${provider}")`
      : `${provider}: HTTP ${status}: ${detail}${body.type && body.message ? ` (${body.type})` : ''}`
  const retryAfter = parseRetryAfter(headers)
  const requestId = requestIdOf(headers).requestId ?? body.requestId
  return new LlmError(message, code, {
    ...(status >= 100 && status <= 599 && { status }),
    ...(retryAfter !== undefined && { providerRetryAfterMs: retryAfter }),
    ...(requestId !== undefined && { requestId }),
  })
}

/** The `error` event of a 200 stream (`{"type":"error","error":{"type","message"}}`). */
export function streamError(provider: string, data: Record<string, unknown>, redact: (text: string) => string, hint: CredentialHint): LlmError {
  const body = parseErrorBody(JSON.stringify(data))
  const message = redact(body.message)
  const code = codeOfType(body.type, message) ?? 'SERVER'
  const what = [body.type, message].filter(Boolean).join(': ') || 'unknown error'
  const text =
    code === 'AUTH'
      ? `${provider}: error in the event stream: ${what} — check ${hint.credential} (route "${provider}")`
      : `${provider}: error in the event stream: ${what}`
  return new LlmError(text, code, body.requestId ? { requestId: body.requestId } : {})
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

export function truncate(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}…` : text
}
