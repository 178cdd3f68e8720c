const ORIGINAL = Symbol.for('cordis.original')

/**
 * The object behind the framework's tracing proxy of a service. Each property read through that proxy
 * builds wrappers and walks prototype chains; a hot path (every event of every session, every step)
 * whose calls need not know the calling context reads the object itself, looked up once.
 */
export function untraced<T extends object>(service: T): T {
  return (service as unknown as Record<symbol, T | undefined>)[ORIGINAL] ?? service
}
