export type { AgentRef } from './agent.ts'
export {
  admits,
  bindScopeParent,
  createScope,
  scopeChainOf,
  scopeOf,
  scopeParentOf,
  withScope,
  type CreateScopeOptions,
  type Scope,
  type ScopeKey,
  type ScopeParentBinding,
} from './scope.ts'
export { serviceLookup, untraced } from './untraced.ts'
export { carrierKeyOf, isScopeCarrier, scopeTarget, type Scoped } from './carrier.ts'
export {
  AnonymousEntries,
  NamedEntries,
  ScopedLayers,
  type LayerEffectOptions,
  type ScopeLayer,
} from './layers.ts'
