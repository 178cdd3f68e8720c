// The routes a client may choose for a new session. A `model` a client sends
// would otherwise go to the provider as sent: any model the provider's account
// can reach, at its price. The list is the serve config's `models`, else what
// the deployment's providers declare (their rows' `models`); the server's own
// default route is always allowed, since a request that names nothing gets it.
import { ApiError } from './http.ts'

/** What the allowlist reads of the deployment's LLM service: the providers and the models each declares. */
export interface ModelCatalog {
  listProviders(): { id: string }[]
  listModels(provider: string): Promise<readonly { id: string }[]>
}

export interface ModelAllowlistOptions {
  /** `provider/model` routes, or `provider/*` for any model of a provider; unset or empty: the models the providers declare. */
  models?: readonly string[]
  /** The deployment's LLM service, read at each check (providers come and go with their plugins). */
  catalog: () => ModelCatalog | undefined
  /** The server's default route (serve config `provider`, `model`). */
  route: { provider?: string; model?: string }
  /** The route a request that names none runs on (the runner's default): its provider is a model-only request's, and it is allowed. */
  defaultRoute?: () => Promise<{ provider: string; model: string } | undefined>
}

/** A route as the allowlist holds it; `model` `*` is any model. */
interface Allowed {
  provider: string
  model: string
}

export class ModelAllowlist {
  private readonly options: ModelAllowlistOptions
  private readonly configured: Allowed[] | undefined

  constructor(options: ModelAllowlistOptions) {
    this.options = options
    this.configured = options.models?.length ? options.models.map(parseRoute) : undefined
  }

  /** Refuses (400 `MODEL_NOT_ALLOWED`, naming the allowed routes) a provider or model the request names outside the list. */
  async check(input: { provider?: string; model?: string }): Promise<void> {
    if (input.provider === undefined && input.model === undefined) return
    const fallback = await this.options.defaultRoute?.().catch(() => undefined)
    const allowed = await this.allowed(fallback)
    const provider = input.provider ?? this.options.route.provider ?? fallback?.provider
    const ok = allowed.some(
      route => (provider === undefined || route.provider === provider) && (input.model === undefined || route.model === '*' || route.model === input.model),
    )
    if (ok) return
    const names = allowed.map(route => `${route.provider}/${route.model}`)
    const asked = input.model === undefined ? `provider "${provider}"` : `model "${provider === undefined ? '' : `${provider}/`}${input.model}"`
    throw new ApiError(400, 'MODEL_NOT_ALLOWED', `${asked} is not allowed on this server (allowed: ${names.join(', ') || 'only the default route'})`, {
      details: { field: input.model === undefined ? 'provider' : 'model', allowed: names },
    })
  }

  /** The configured routes, else each provider's declared models; with the server's default routes. */
  private async allowed(fallback: Allowed | undefined): Promise<Allowed[]> {
    const routes: Allowed[] = [...(this.configured ?? (await this.declared()))]
    for (const { provider, model } of [this.options.route, fallback ?? {}]) {
      if (provider !== undefined && model !== undefined && !routes.some(route => route.provider === provider && route.model === model)) {
        routes.push({ provider, model })
      }
    }
    return routes
  }

  private async declared(): Promise<Allowed[]> {
    const catalog = this.options.catalog()
    if (!catalog) return []
    const lists = await Promise.all(
      catalog.listProviders().map(async ({ id }) => (await catalog.listModels(id).catch(() => [])).map(model => ({ provider: id, model: model.id }))),
    )
    return lists.flat()
  }
}

/** `provider/model`: the provider is up to the first slash (model ids may hold slashes). */
function parseRoute(route: string): Allowed {
  const slash = route.indexOf('/')
  if (slash <= 0 || slash === route.length - 1) {
    throw new Error(`@loom/serve: models entry "${route}" must be provider/model (or provider/* for any model of that provider)`)
  }
  return { provider: route.slice(0, slash), model: route.slice(slash + 1) }
}
