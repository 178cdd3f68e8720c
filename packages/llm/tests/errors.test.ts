import { describe, expect, it } from 'vitest'
import { errorChain, HarnessError, LLM_ERROR_CODES, LlmError, toFailure } from '@loom/llm'

describe('LlmError', () => {
  it('is a HarnessError with a code and a frozen failure', () => {
    const error = new LlmError('provider 401', 'AUTH', { status: 401, providerRetryAfterMs: 2000, requestId: 'req-1' })
    expect(error).toBeInstanceOf(HarnessError)
    expect(error).toBeInstanceOf(Error)
    expect(error.name).toBe('LlmError')
    expect(error.code).toBe('AUTH')
    expect(error.message).toBe('provider 401')
    expect(error.failure).toEqual({ message: 'provider 401', code: 'AUTH', status: 401, providerRetryAfterMs: 2000, requestId: 'req-1' })
    expect(Object.isFrozen(error.failure)).toBe(true)
  })

  it('omits absent details from the failure and keeps the cause on the error', () => {
    const cause = new Error('socket hang up')
    const error = new LlmError('network down', 'NETWORK', { cause })
    expect(error.failure).toEqual({ message: 'network down', code: 'NETWORK' })
    expect(Object.keys(error.failure)).toEqual(['message', 'code'])
    expect(error.cause).toBe(cause)
    expect(new LlmError('x', 'Y')).not.toHaveProperty('cause')
  })

  it.each([
    ['an empty message', () => new LlmError('', 'AUTH'), /message/],
    ['an empty code', () => new LlmError('m', ''), /code/],
    ['a status below 100', () => new LlmError('m', 'SERVER', { status: 99 }), /status/],
    ['a status above 599', () => new LlmError('m', 'SERVER', { status: 600 }), /status/],
    ['a fractional status', () => new LlmError('m', 'SERVER', { status: 500.5 }), /status/],
    ['a zero retry-after', () => new LlmError('m', 'RATE_LIMIT', { providerRetryAfterMs: 0 }), /providerRetryAfterMs/],
    ['a negative retry-after', () => new LlmError('m', 'RATE_LIMIT', { providerRetryAfterMs: -1 }), /providerRetryAfterMs/],
    ['an infinite retry-after', () => new LlmError('m', 'RATE_LIMIT', { providerRetryAfterMs: Infinity }), /providerRetryAfterMs/],
    ['a NaN retry-after', () => new LlmError('m', 'RATE_LIMIT', { providerRetryAfterMs: NaN }), /providerRetryAfterMs/],
    ['an empty request id', () => new LlmError('m', 'SERVER', { requestId: '' }), /requestId/],
  ])('rejects %s', (_, build, message) => {
    expect(build).toThrow(TypeError)
    expect(build).toThrow(message)
  })

  it('accepts the boundary statuses', () => {
    expect(new LlmError('m', 'X', { status: 100 }).failure.status).toBe(100)
    expect(new LlmError('m', 'X', { status: 599 }).failure.status).toBe(599)
  })

  it('documents every code it uses in the runtime', () => {
    for (const code of ['NO_ADAPTER', 'DUPLICATE_ADAPTER', 'INVALID_PREPARED_CALL', 'UNSUPPORTED_REASONING_EFFORT', 'ABORTED', 'UNKNOWN']) {
      expect(LLM_ERROR_CODES).toHaveProperty(code)
    }
  })
})

describe('errorChain', () => {
  it('renders the message, or the name when the message is empty', () => {
    expect(errorChain(new Error('boom'))).toBe('boom')
    expect(errorChain(new TypeError(''))).toBe('TypeError')
  })

  it('renders aggregate members in brackets', () => {
    const error = new AggregateError([new Error('a'), 'b', new Error('c')], 'several failed')
    expect(errorChain(error)).toBe('several failed [a; b; c]')
    expect(errorChain(new AggregateError([], 'none'))).toBe('none')
  })

  it('renders the cause chain', () => {
    const root = new Error('ECONNRESET')
    const middle = new Error('fetch failed', { cause: root })
    expect(errorChain(new Error('request failed', { cause: middle }))).toBe('request failed: fetch failed: ECONNRESET')
  })

  it('skips a cause that renders identically', () => {
    expect(errorChain(new Error('same', { cause: new Error('same') }))).toBe('same')
  })

  it('renders a cycle as <circular cause>', () => {
    const a = new Error('a')
    const b = new Error('b', { cause: a })
    ;(a as { cause?: unknown }).cause = b
    expect(errorChain(a)).toBe('a: b: <circular cause>')
    const self = new Error('self')
    ;(self as { cause?: unknown }).cause = self
    expect(errorChain(self)).toBe('self: <circular cause>')
  })

  it('renders a hostile accessor as <unrenderable value>, and never throws', () => {
    const hostile = new Error('outer')
    Object.defineProperty(hostile, 'cause', {
      get() {
        throw new Error('no')
      },
    })
    expect(errorChain(hostile)).toBe('<unrenderable value>')
    const inner = new Error('inner')
    Object.defineProperty(inner, 'message', {
      get() {
        throw new Error('no')
      },
    })
    expect(errorChain(new Error('outer', { cause: inner }))).toBe('outer: <unrenderable value>')
    const noString = {
      toString() {
        throw new Error('no')
      },
    }
    expect(errorChain(noString)).toBe('<unrenderable value>')
    expect(errorChain(Object.create(null))).toBe('<unrenderable value>')
  })

  it('renders non-Error values', () => {
    expect(errorChain({ message: 'plain object' })).toBe('plain object')
    expect(errorChain(Object.create({ message: 'inherited' }))).toBe('[object Object]')
    expect(errorChain({ message: 42 })).toBe('[object Object]')
    expect(errorChain('naked string error')).toBe('naked string error')
    expect(errorChain(404)).toBe('404')
    expect(errorChain(undefined)).toBe('undefined')
    expect(errorChain(null)).toBe('null')
  })

  it('renders a non-Error cause', () => {
    expect(errorChain(new Error('outer', { cause: { message: 'plain' } }))).toBe('outer: plain')
    expect(errorChain(new Error('outer', { cause: 'text' }))).toBe('outer: text')
  })
})

describe('toFailure', () => {
  it('uses an LlmError failure verbatim', () => {
    const error = new LlmError('slow down', 'RATE_LIMIT', { status: 429 })
    expect(toFailure(error)).toBe(error.failure)
  })

  it('uses a valid own failure whose code matches the error code', () => {
    const failure = { message: 'from another copy', code: 'AUTH', status: 401 }
    const error = Object.assign(new Error('from another copy'), { code: 'AUTH', failure })
    expect(toFailure(error)).toBe(failure)
    const mismatch = Object.assign(new Error('mismatch'), { code: 'SERVER', failure })
    expect(toFailure(mismatch)).toEqual({ message: 'mismatch', code: 'UNKNOWN' })
    const invalid = Object.assign(new Error('invalid'), { code: 'AUTH', failure: { message: '', code: 'AUTH' } })
    expect(toFailure(invalid)).toEqual({ message: 'invalid', code: 'UNKNOWN' })
  })

  it('takes the code of a HarnessError, UNKNOWN for other errors', () => {
    expect(toFailure(new HarnessError('no route', 'NO_ADAPTER'))).toEqual({ message: 'no route', code: 'NO_ADAPTER' })
    expect(toFailure(new Error('MockAdapter: script exhausted'))).toEqual({ message: 'MockAdapter: script exhausted', code: 'UNKNOWN' })
    expect(toFailure(new Error(''))).toEqual({ message: 'LLM adapter failed', code: 'UNKNOWN' })
  })

  it('renders a non-Error throw with String()', () => {
    expect(toFailure({ code: 500 })).toEqual({ message: '[object Object]', code: 'UNKNOWN' })
    expect(toFailure('naked')).toEqual({ message: 'naked', code: 'UNKNOWN' })
  })

  it('never throws', () => {
    expect(toFailure(Object.create(null))).toEqual({ message: 'LLM adapter failed', code: 'UNKNOWN' })
    const hostile = new Error('x')
    Object.defineProperty(hostile, 'message', {
      get() {
        throw new Error('no')
      },
    })
    expect(toFailure(hostile)).toEqual({ message: 'LLM adapter failed', code: 'UNKNOWN' })
  })
})
