// The page's first module: it keeps the token from the address, starts reading
// the first view's data, and only then loads the rest of the page (its modules
// are already on their way: index.html preloads them), so the two overlap.
import { prefetch, takeTokenFromAddress, token } from './api.js'

takeTokenFromAddress()
if (token.get() !== null) {
  const session = /^#\/s\/([^/]+)/.exec(location.hash)?.[1]
  prefetch(session === undefined ? 'sessions' : `sessions/${session}`)
}
import('./app.js')
