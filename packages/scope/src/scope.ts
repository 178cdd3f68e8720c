import { Context } from '@deepseek-ai/cordis'

/** Any object; scopes are compared by identity. An agent uses itself as its key. */
export type ScopeKey = object

export interface Scope {
  /** The tagged context: registrations made through it (or anything derived from it) land in this scope. */
  readonly ctx: Context
  /** The framework disposer of the backing fiber, usable inside composite effects. */
  readonly rawDispose: () => Promise<void>
  /** Disposes every registration made through the scope; idempotent, settles after async teardown. */
  dispose(): Promise<void>
}

export interface CreateScopeOptions {
  /** Binds `key` to this parent before anything is created (see {@link bindScopeParent}). */
  parent?: ScopeKey
}

export interface ScopeParentBinding {
  /** Points the key at another parent; the same cycle check applies. */
  rebind(parent: ScopeKey): void
}

const TAG = Symbol.for('loom.scope.tag')
const parents = new WeakMap<ScopeKey, ScopeKey>()

// A no-op plugin: its fiber owns everything registered through the scope. It has
// no name, so `fiber.name` (the owner reported for registrations) stays the name
// of the plugin that minted the scope.
const ScopeFiber = { apply() {} }

/**
 * Mints a scope under `ctx`: a child fiber whose context carries the tag `key`.
 * Every context derived from it (extend, child plugins) inherits the tag; the
 * nearest tag wins when scopes are minted from scoped contexts.
 */
export function createScope(ctx: Context, key: ScopeKey, options: CreateScopeOptions = {}): Scope {
  if (options.parent !== undefined) bindScopeParent(key, options.parent)
  const fiber = ctx.plugin(ScopeFiber)
  const scoped = fiber.ctx.extend({ [TAG]: key })
  const rawDispose = fiber.dispose
  let disposal: Promise<void> | undefined
  return {
    ctx: scoped,
    rawDispose,
    // A second call of the framework disposer returns at once; when rawDispose ran
    // first, wait for the teardown it started.
    dispose: () =>
      (disposal ??= (async () => {
        await rawDispose()
        while (fiber.inertia) await fiber.inertia
      })()),
  }
}

/**
 * A view of `ctx` whose registrations land in `key`'s layer while staying owned
 * by `ctx`'s own fiber (and plugin name). For a plugin that contributes to an
 * agent it did not create: unloading the plugin removes the contributions; the
 * plugin removes them itself when the agent goes.
 */
export function withScope(ctx: Context, key: ScopeKey): Context {
  return ctx.extend({ [TAG]: key })
}

/** The nearest scope tag of a context, or `undefined` for the global (unscoped) view. */
export function scopeOf(ctx: Context): ScopeKey | undefined {
  return (ctx as unknown as Record<symbol, ScopeKey | undefined>)[TAG]
}

export function scopeParentOf(key: ScopeKey): ScopeKey | undefined {
  return parents.get(key)
}

/** `[key, parent, grandparent, ...]`; `[]` for `undefined`. Read live, so rebinds apply at once. */
export function scopeChainOf(key: ScopeKey | undefined): ScopeKey[] {
  const chain: ScopeKey[] = []
  for (let k = key; k !== undefined; k = parents.get(k)) chain.push(k)
  return chain
}

function assertNoCycle(key: ScopeKey, parent: ScopeKey) {
  if (scopeChainOf(parent).includes(key)) {
    throw new Error('@loom/scope: scope parent link would form a cycle')
  }
}

/**
 * Links `key` to `parent` once. Only the returned binding may move the link later;
 * links that would close a cycle (including a key naming itself) are refused.
 */
export function bindScopeParent(key: ScopeKey, parent: ScopeKey): ScopeParentBinding {
  if (parents.has(key)) {
    throw new Error('@loom/scope: scope key is already bound to a parent; re-linking requires the binding returned by the original bind')
  }
  assertNoCycle(key, parent)
  parents.set(key, parent)
  return {
    rebind(next) {
      assertNoCycle(key, next)
      parents.set(key, next)
    },
  }
}

/** True when a listener tagged `listener` may hear a dispatch keyed to `subject`. */
export function admits(listener: ScopeKey | undefined, subject: ScopeKey | undefined): boolean {
  return listener === undefined || scopeChainOf(subject).includes(listener)
}
