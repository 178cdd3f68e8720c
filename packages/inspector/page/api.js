// The inspector's API from the page: the token in the tab's session storage,
// sent as a bearer header (never in a URL); a 401 forgets it. Live updates read
// the session's event stream with fetch, which can send the header (an
// EventSource cannot), and resume after the last seq they saw.
const TOKEN_KEY = 'loom-inspector-token'

export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY),
  set: value => sessionStorage.setItem(TOKEN_KEY, value),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
}

/** `loom inspect` prints the page's address with `?token=`: kept for this tab, dropped from the address bar and its history. */
export function takeTokenFromAddress() {
  const url = new URL(location.href)
  const given = url.searchParams.get('token')
  if (given === null) return
  token.set(given)
  url.searchParams.delete('token')
  history.replaceState(history.state, '', url.pathname + url.search + url.hash)
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message)
    this.status = status
    this.code = code
  }
}

const endpoint = path => new URL(`api/${path}`, document.baseURI)

/** Reads started before the view asked (the first view's, while the page's modules load), by path: each taken once. */
const early = new Map()

export function prefetch(path) {
  const read = get(path)
  read.catch(() => {})
  early.set(path, read)
}

export async function get(path, signal) {
  const started = early.get(path)
  if (started) {
    early.delete(path)
    return started
  }
  const response = await fetch(endpoint(path), { headers: { authorization: `Bearer ${token.get() ?? ''}` }, signal })
  const body = await response.json().catch(() => null)
  if (response.status === 401) {
    token.clear()
    dispatchEvent(new CustomEvent('loom:unauthorized'))
  }
  if (!response.ok) throw new ApiError(response.status, body?.error?.code ?? 'HTTP', body?.error?.message ?? `the server answered ${response.status}`)
  return body
}

/**
 * Follows session `id`'s events after `after` until `signal` aborts: calls
 * `onEvents(batch)` with each batch of `{ seq, type }`, reconnecting after the
 * last seq when the stream breaks.
 */
export async function follow(id, after, onEvents, signal) {
  let last = after
  while (!signal.aborted) {
    try {
      const response = await fetch(endpoint(`sessions/${encodeURIComponent(id)}/events?after=${last}`), {
        headers: { authorization: `Bearer ${token.get() ?? ''}` },
        signal,
      })
      if (!response.ok || !response.body) throw new ApiError(response.status, 'HTTP', `the event stream answered ${response.status}`)
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader()
      let buffer = ''
      for (;;) {
        const { value, done } = await reader.read()
        if (done) break
        buffer += value
        const batch = []
        let end = buffer.indexOf('\n\n')
        while (end !== -1) {
          const data = buffer
            .slice(0, end)
            .split('\n')
            .find(line => line.startsWith('data: '))
          buffer = buffer.slice(end + 2)
          if (data) batch.push(JSON.parse(data.slice(6)))
          end = buffer.indexOf('\n\n')
        }
        if (batch.length) {
          last = batch.at(-1).seq
          onEvents(batch)
        }
      }
    } catch (error) {
      if (signal.aborted) return
      if (error instanceof ApiError && (error.status === 401 || error.status === 404)) return
    }
    await new Promise(resolve => setTimeout(resolve, 1000))
  }
}
