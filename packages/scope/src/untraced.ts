import type { Context } from '@deepseek-ai/cordis'

const ORIGINAL = Symbol.for('cordis.original')

/**
 * The object behind the framework's tracing proxy of a service. Each property read through that proxy
 * builds wrappers and walks prototype chains; a hot path (every event of every session, every step)
 * whose calls need not know the calling context reads the object itself, looked up once.
 */
export function untraced<T extends object>(service: T): T {
  return (service as unknown as Record<symbol, T | undefined>)[ORIGINAL] ?? service
}

/**
 * Service `name` as `ctx` sees it, looked up at the first call and again only after
 * the service changed (provided, replaced or gone: `internal/service`). A lookup
 * through the context builds an Error and runs a waterfall; a caller at every step of
 * every session (an optional service it cannot inject) reads the remembered one.
 */
export function serviceLookup<K extends string & keyof Context>(ctx: Context, name: K): () => Context[K] | undefined {
  let found: { value: Context[K] | undefined } | undefined
  ctx.on('internal/service', changed => {
    if (changed === name) found = undefined
  })
  return () => (found ??= { value: ctx.get(name) as Context[K] | undefined }).value
}
