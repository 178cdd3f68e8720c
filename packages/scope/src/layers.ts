import type { Context } from '@deepseek-ai/cordis'
import { scopeChainOf, scopeOf, type ScopeKey } from './scope.ts'

/**
 * An insertion-ordered table whose iterators are live within one "generation":
 * an entry added while a caller iterates is seen by that iteration. When the table
 * drains to empty it swaps to a fresh map, so iterators from before the drain stop
 * and a replacement registered during one pass waits for the next pass.
 */
abstract class EntryTable<K, V> {
  protected map = new Map<K, { value: V }>()

  protected add(key: K, value: V): () => void {
    const entry = { value }
    const map = this.map
    map.set(key, entry)
    return () => {
      // Exact-entry undo: an old undo never removes a newer entry of the same name.
      if (map.get(key) !== entry) return
      map.delete(key)
      if (map.size === 0 && map === this.map) this.map = new Map()
    }
  }

  *values(): IterableIterator<V> {
    for (const entry of this.map.values()) yield entry.value
  }

  isEmpty(): boolean {
    return this.map.size === 0
  }
}

/** Named registrations: a duplicate name throws the caller's error. */
export class NamedEntries<V> extends EntryTable<string, V> {
  private readonly duplicateError: (name: string) => Error

  constructor(duplicateError: (name: string) => Error) {
    super()
    this.duplicateError = duplicateError
  }

  insert(name: string, value: V): () => void {
    if (this.map.has(name)) throw this.duplicateError(name)
    return this.add(name, value)
  }

  get(name: string): V | undefined {
    return this.map.get(name)?.value
  }

  has(name: string): boolean {
    return this.map.has(name)
  }

  keys(): IterableIterator<string> {
    return this.map.keys()
  }

  *entries(): IterableIterator<[string, V]> {
    for (const [name, entry] of this.map) yield [name, entry.value]
  }
}

/** Registrations without a name: each append is independent, even for equal values. */
export class AnonymousEntries<V> extends EntryTable<symbol, V> {
  append(value: V): () => void {
    return this.add(Symbol(), value)
  }
}

export interface ScopeLayer {
  isEmpty(): boolean
}

export interface LayerEffectOptions {
  /** Shown in the fiber's effect diagnostics. */
  label: string
  /** Call `onChange` after the registration and after its removal (default true). */
  notify?: boolean
}

/**
 * One global layer plus a layer per scope, created on the first registration in
 * that scope and dropped again once it is empty. Reads never create layers.
 */
export class ScopedLayers<L extends ScopeLayer> {
  private readonly createLayer: (scope: ScopeKey | undefined) => L
  private readonly onChange: () => void
  readonly global: L
  readonly #scoped = new WeakMap<ScopeKey, L>()

  constructor(createLayer: (scope: ScopeKey | undefined) => L, onChange: () => void) {
    this.createLayer = createLayer
    this.onChange = onChange
    this.global = createLayer(undefined)
  }

  /** The exact layer of a scope, if it exists; never the global layer, never creates. */
  peek(scope: ScopeKey | undefined): L | undefined {
    return scope === undefined ? undefined : this.#scoped.get(scope)
  }

  /** Existing layers along the scope's parent chain, farthest ancestor first. Excludes the global layer. */
  chainLayers(scope: ScopeKey | undefined): L[] {
    const layers: L[] = []
    for (const key of scopeChainOf(scope)) {
      const layer = this.#scoped.get(key)
      if (layer) layers.unshift(layer)
    }
    return layers
  }

  /** Global then chain layers, farthest first; a nearer layer replaces a name in place. */
  merge<V>(scope: ScopeKey | undefined, pick: (layer: L) => NamedEntries<V>): Map<string, V> {
    const merged = new Map<string, V>()
    for (const layer of [this.global, ...this.chainLayers(scope)]) {
      for (const [name, value] of pick(layer).entries()) merged.set(name, value)
    }
    return merged
  }

  /**
   * Runs `action` on the layer of `ctx`'s scope as an effect on `ctx`'s fiber and
   * returns the framework's disposer. Disposal undoes the action, reclaims an empty
   * layer, then notifies. If the notification throws, the framework runs that
   * disposal at once and the error reaches the caller: nothing leaks.
   */
  effect(ctx: Context, action: (layer: L) => () => void, options: LayerEffectOptions): () => void {
    const notify = options.notify ?? true
    return ctx.effect(() => this.#register(scopeOf(ctx), action, notify), options.label) as () => void
  }

  *#register(scope: ScopeKey | undefined, action: (layer: L) => () => void, notify: boolean) {
    const layer = this.#resolve(scope)
    let undo: () => void
    try {
      undo = action(layer)
    } catch (error) {
      this.#reclaim(scope, layer)
      throw error
    }
    yield () => {
      undo()
      this.#reclaim(scope, layer)
      if (notify) this.onChange()
    }
    if (notify) this.onChange()
  }

  #resolve(scope: ScopeKey | undefined): L {
    if (scope === undefined) return this.global
    let layer = this.#scoped.get(scope)
    if (!layer) {
      layer = this.createLayer(scope)
      this.#scoped.set(scope, layer)
    }
    return layer
  }

  #reclaim(scope: ScopeKey | undefined, layer: L) {
    if (scope !== undefined && layer.isEmpty() && this.#scoped.get(scope) === layer) {
      this.#scoped.delete(scope)
    }
  }
}
