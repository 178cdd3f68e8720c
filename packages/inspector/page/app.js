// The inspector's page: sign-in, the address (#/…) as the view, and the views.
//
//   #/                          sessions
//   #/s/ID                      a session's transcript
//   #/s/ID/r, #/s/ID/r/N        its requests, request N
//   #/s/ID/series               cache and tokens over the session
//   #/s/ID/diff/A/B             two requests' manifests compared
//   #/s/ID/footprint/PLUGIN     a plugin's footprint across the session
//
// Every view is a link, so Tab and Enter reach each one; a view that opens moves
// the focus to its heading.
import { render } from 'preact'
import { useEffect, useRef, useState } from 'preact/hooks'
import { follow, get, token } from './api.js'
import { DiffView } from './diff.js'
import { RequestList, RequestView } from './request.js'
import { SessionsView } from './sessions.js'
import { Transcript } from './transcript.js'
import { count, Failure, focusOnOpen, Heading, html, money, percent, sessionHref, Status, useData, useFirstView } from './ui.js'

function parse(hash) {
  const parts = hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent)
  if (parts[0] !== 's' || parts.length < 2) return { view: 'sessions' }
  const [, id, tab, ...rest] = parts
  const number = value => (value === undefined || !/^\d+$/.test(value) ? undefined : Number(value))
  switch (tab) {
    case 'r':
      return { view: 'session', id, tab: 'requests', request: number(rest[0]) }
    case 'series':
      return { view: 'session', id, tab: 'series' }
    case 'diff':
      return { view: 'session', id, tab: 'diff', a: number(rest[0]), b: number(rest[1]) }
    case 'footprint':
      return { view: 'session', id, tab: 'footprint', plugin: rest[0] }
    default:
      return { view: 'session', id, tab: 'transcript' }
  }
}

function useHash() {
  const [hash, setHash] = useState(location.hash)
  useEffect(() => {
    const changed = () => setHash(location.hash)
    addEventListener('hashchange', changed)
    return () => removeEventListener('hashchange', changed)
  }, [])
  return hash
}

/** A module loaded when its view first opens (`load` false until then): the charts bring uPlot. */
function useModule(load) {
  const [module, setModule] = useState(null)
  const wanted = Boolean(load)
  useEffect(() => {
    if (wanted && !module) load().then(setModule)
  }, [wanted])
  return module
}

function Login({ message, onSignedIn }) {
  const [error, setError] = useState(message)
  const [busy, setBusy] = useState(false)
  const submit = async event => {
    event.preventDefault()
    const value = new FormData(event.currentTarget).get('token').trim()
    if (!value) return setError('Enter the token the server was started with.')
    setBusy(true)
    token.set(value)
    try {
      await get('sessions')
      onSignedIn()
    } catch (failure) {
      setError(failure.status === 401 ? 'That token was not accepted (401). Check it and try again.' : failure.message)
    } finally {
      setBusy(false)
    }
  }
  return html`<main id="main">
    <form class="login" onSubmit=${submit} aria-labelledby="login-title">
      <h1 id="login-title">Sign in to the Loom inspector</h1>
      <p class="muted">The token is the server's bearer token (LOOM_SERVE_TOKEN, or the one in the address <code>loom inspect</code> printed). It stays in this tab only.</p>
      <label for="token">Token</label>
      <input id="token" name="token" type="password" autocomplete="off" required autofocus />
      ${error && html`<p class="error" role="alert">${error}</p>`}
      <button type="submit" disabled=${busy}>Sign in</button>
    </form>
  </main>`
}

const TABS = [
  ['transcript', 'Transcript', id => sessionHref(id)],
  ['requests', 'Requests', id => sessionHref(id, 'r')],
  ['series', 'Cache & tokens', id => sessionHref(id, 'series')],
  ['diff', 'Diff', id => sessionHref(id, 'diff')],
  ['footprint', 'Footprint', id => sessionHref(id, 'footprint')],
]

function SessionFrame({ route, onLive }) {
  const { id, tab } = route
  const [version, setVersion] = useState(0)
  const { data, error } = useData(`sessions/${encodeURIComponent(id)}`, version)
  const following = useRef(null)
  // Live: the session's new events (the same stream `loom serve` clients read) make the views read again, at most every 300 ms.
  useEffect(() => {
    if (!data || following.current === id) return
    following.current = id
    const abort = new AbortController()
    let timer = null
    follow(
      id,
      data.nextSeq - 1,
      batch => {
        onLive(`${id}: event ${batch.at(-1).seq} (${batch.at(-1).type})`)
        timer ??= setTimeout(() => {
          timer = null
          setVersion(value => value + 1)
        }, 300)
      },
      abort.signal,
    )
    return () => {
      following.current = null
      abort.abort()
      clearTimeout(timer)
    }
  }, [id, Boolean(data)])
  const Series = useModule(tab === 'series' && (() => import('./series.js')))?.SeriesView
  const Footprint = useModule(tab === 'footprint' && (() => import('./footprint.js')))?.FootprintView
  useFirstView(Boolean(data) && tab === 'transcript')
  const title = html`<${Heading} level=${1} take=${tab === 'transcript'}>Session ${id}</${Heading}>`
  if (error && !data) return html`${title}<${Failure} error=${error} />`
  if (!data) return html`${title}<p class="loading">Reading the session…</p>`
  const { row, meta } = data
  let body
  if (tab === 'transcript') body = html`<h2 class="sr">Transcript</h2><${Transcript} id=${id} session=${data} />`
  else if (tab === 'requests') body = route.request === undefined ? html`<${Heading}>Requests</${Heading}><${RequestList} id=${id} session=${data} />` : html`<${RequestView} id=${id} number=${route.request} version=${version} />`
  else if (tab === 'series') body = Series ? html`<${Series} id=${id} version=${version} />` : html`<p class="loading">Loading the charts…</p>`
  else if (tab === 'diff') body = html`<${DiffView} id=${id} session=${data} a=${route.a} b=${route.b} version=${version} />`
  else body = Footprint ? html`<${Footprint} id=${id} plugin=${route.plugin} version=${version} />` : html`<p class="loading">Loading the charts…</p>`
  return html`${title}
    <ul class="facts" aria-label="About this session">
      <li><span>project</span>${row.project ?? '–'}</li>
      <li><span>status</span><${Status} status=${row.status} /></li>
      <li><span>turns</span>${count(row.turns)}</li>
      <li><span>requests</span>${count(row.requests)}</li>
      <li><span>input tokens</span>${count(row.inputTokens)}${row.figures === 'estimated' ? ' (est.)' : ''}</li>
      <li><span>cost</span>${money(row.cost)}</li>
      <li><span>cache hits</span>${percent(row.hitShare)}</li>
      <li><span>route</span>${row.route ?? '–'}</li>
      ${meta.parentSession && html`<li><span>subagent of</span><a href=${sessionHref(meta.parentSession)}>${meta.parentSession}</a></li>`}
      ${row.children.length > 0 && html`<li><span>subagents</span>${row.children.map((child, i) => html`${i ? ', ' : ''}<a href=${sessionHref(child.id)}>${child.id}</a>`)}</li>`}
    </ul>
    <nav class="tabs" aria-label="Views of this session">
      ${TABS.map(([key, label, href]) => html`<a href=${href(id)} aria-current=${tab === key ? 'page' : undefined}>${label}</a>`)}
    </nav>
    ${body}`
}

function App() {
  const hash = useHash()
  const [signedIn, setSignedIn] = useState(token.get() !== null)
  const [message, setMessage] = useState(null)
  const [live, setLive] = useState('')
  const first = useRef(null)
  useEffect(() => {
    const refused = () => {
      setMessage('The server did not accept the token (401). Sign in again.')
      setSignedIn(false)
    }
    addEventListener('loom:unauthorized', refused)
    return () => removeEventListener('loom:unauthorized', refused)
  }, [])
  // A view that opens takes the focus to its heading (not on the first load: the reader starts at the top).
  if (first.current !== hash) {
    focusOnOpen.pending = first.current !== null
    first.current = hash
  }
  if (!signedIn) return html`<${Login} message=${message} onSignedIn=${() => setSignedIn(true)} />`
  const route = parse(hash)
  const signOut = () => {
    token.clear()
    setMessage(null)
    setSignedIn(false)
  }
  return html`<a class="skip" href="#main" onClick=${event => (event.preventDefault(), document.getElementById('main').focus())}>Skip to the view</a>
    <header class="top">
      <a class="brand" href="#/">Loom inspector</a>
      <a href="#/">Sessions</a>
      <span class="live" role="status" aria-live="polite">${live && `live: ${live}`}</span>
      <button type="button" onClick=${signOut}>Sign out</button>
    </header>
    <main id="main" tabindex="-1">
      ${route.view === 'sessions' ? html`<${SessionsView} />` : html`<${SessionFrame} key=${route.id} route=${route} onLive=${setLive} />`}
    </main>`
}

const root = document.getElementById('app')
root.textContent = ''
render(html`<${App} />`, root)
