import { Context } from '@deepseek-ai/cordis'
import { admits, scopeOf, type ScopeKey } from './scope.ts'

declare const carrierBrand: unique symbol
/** The dispatch `this` of a scope-filtered event: opaque, keyed to one scope. */
export type Scoped<T extends object> = { readonly [carrierBrand]: T }

const KEY = Symbol('loom.scope.carrier')

type Filter = (this: unknown, ctx: Context) => boolean

/**
 * Builds the thisArg for a scope-filtered dispatch. A listener hears it when it was
 * registered through an untagged context, through `key`'s scope or an ancestor's,
 * or with `{ global: true }`. The base object's own filter (a service's isolation
 * check) runs first, with `this === base`.
 */
export function scopeTarget<T extends object>(base: T, key: ScopeKey | undefined): Scoped<T> {
  if (key === undefined) return carrierOf(base, key)
  // One per base and scope, made once: the loop dispatches through an agent's at every status change and step.
  let byKey = carriers.get(base)
  if (!byKey) carriers.set(base, (byKey = new WeakMap()))
  let carrier = byKey.get(key)
  if (!carrier) byKey.set(key, (carrier = carrierOf(base, key)))
  return carrier as Scoped<T>
}

const carriers = new WeakMap<object, WeakMap<ScopeKey, Scoped<object>>>()

function carrierOf<T extends object>(base: T, key: ScopeKey | undefined): Scoped<T> {
  const baseFilter = (base as Record<symbol, Filter | undefined>)[Context.filter]
  const carrier = Object.create(null)
  Object.defineProperty(carrier, KEY, { value: { key } })
  Object.defineProperty(carrier, Context.filter, {
    value(ctx: Context) {
      if (baseFilter && !baseFilter.call(base, ctx)) return false
      return admits(scopeOf(ctx), key)
    },
  })
  return Object.freeze(carrier)
}

export function isScopeCarrier(value: unknown): value is Scoped<object> {
  return typeof value === 'object' && value !== null && Object.hasOwn(value, KEY)
}

export function carrierKeyOf(value: unknown): ScopeKey | undefined {
  return isScopeCarrier(value) ? (value as unknown as Record<symbol, { key: ScopeKey | undefined }>)[KEY].key : undefined
}
