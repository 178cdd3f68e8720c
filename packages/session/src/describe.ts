// Session events in words: how a turn ended, why a request header changed, which
// plugins a resumed session runs on that its last request did not, a retry. The
// terminal transcript (`loom sessions show`) and the inspector say the same.
import type { AgentCancelCause, AgentRouteSwitch, PluginDrift, RequestHeaderChanges, SessionEventMap, TurnEndReason } from './events.ts'

/** `completed`, `error: CODE: message`, `aborted (user)`, `stopped at the limit of …`. */
export function describeReason(reason: TurnEndReason): string {
  switch (reason.kind) {
    case 'error':
      return `error: ${reason.error.code}: ${reason.error.message}`
    case 'aborted':
      return `aborted (${describeCause(reason.reason)})`
    case 'limit':
      return `stopped at the ${describeLimit(reason)}`
    default:
      return reason.kind
  }
}

function describeCause(cause: AgentCancelCause): string {
  if (cause.kind === 'hook') return `hook: ${cause.reason}`
  if (cause.kind === 'uncaught') return `${cause.plugin === undefined ? 'an internal error' : `an uncaught error of plugin "${cause.plugin}"`}: ${cause.error}`
  return cause.kind
}

/** `limit of 50 model requests per turn (--max-steps)`, `limit of $0.5 per turn ($0.5200 used; --max-cost)`. */
function describeLimit(reason: Extract<TurnEndReason, { kind: 'limit' }>): string {
  switch (reason.limit) {
    case 'max-steps':
      return `limit of ${reason.max} model requests per turn (--max-steps)`
    case 'max-input-tokens':
      return `limit of ${reason.max} input tokens per turn (${reason.used} used; --max-input-tokens)`
    case 'max-cost-usd':
      return `limit of $${reason.max} per turn ($${reason.used.toFixed(4)} used; --max-cost)`
  }
}

/** `retrying in 2 s: deepseek: HTTP 429: … (retry 1 of 5)` */
export function describeRetry(retry: SessionEventMap['request/retry']): string {
  const wait = retry.delayMs >= 1000 ? `${(retry.delayMs / 1000).toFixed(retry.delayMs % 1000 ? 1 : 0)} s` : `${retry.delayMs} ms`
  return `retrying in ${wait}: ${retry.failure.message} (retry ${retry.retry}${retry.maxRetries !== undefined ? ` of ${retry.maxRetries}` : ''})`
}

/** `added @loom/web-fetch 0.1.0; removed @loom/mcp 0.1.0; upgraded @loom/tool-fs 0.1.0 → 0.2.0; edited greeter (source 3f2a1b9c04d2 → 9c8d7e11aa00)` */
export function describeDrift({ added, removed, upgraded, changed = [] }: PluginDrift): string {
  const at = (version: string | undefined) => version ?? '(version unknown)'
  return [
    ...added.map(plugin => `added ${plugin.name} ${at(plugin.version)}`),
    ...removed.map(plugin => `removed ${plugin.name} ${at(plugin.version)}`),
    ...upgraded.map(plugin => `upgraded ${plugin.name} ${at(plugin.from)} → ${at(plugin.to)}`),
    ...changed.map(
      plugin => `edited ${plugin.name}${plugin.version ? ` ${plugin.version}` : ''} (source ${plugin.from.slice(0, 12)} → ${plugin.to.slice(0, 12)})`,
    ),
  ].join('; ')
}

/** The causes of a header change, one phrase each: the plugins that drifted, then each section, tool and config key, then where the prefix broke. */
export function headerChangeCauses(changes: RequestHeaderChanges, drift?: PluginDrift): string[] {
  // A switched route explains its own config keys.
  const { route } = changes
  const config = route ? changes.config.filter(key => key !== 'provider' && key !== 'model') : changes.config
  return [
    ...(route ? [describeRouteSwitch(route)] : []),
    ...(drift ? [`other plugins than before: ${describeDrift(drift)}`] : []),
    ...changes.sections.map(
      entry =>
        `section "${entry.name}" of plugin "${entry.owner}" ${entry.byBudget ? (entry.change === 'removed' ? 'left out by the prompt budgets' : 'back within the prompt budgets') : entry.change}`,
    ),
    ...(changes.resized ?? []).map(
      entry =>
        `section "${entry.name}" of plugin "${entry.owner}" ${entry.toChars > entry.fromChars ? 'grew' : 'shrank'} from ${entry.fromChars} to ${entry.toChars} characters`,
    ),
    ...changes.tools.map(entry => `tool "${entry.name}" of plugin "${entry.owner}" ${entry.change}`),
    ...(config.length ? [`config ${config.map(key => `"${key}"`).join(', ')} changed`] : []),
    ...(changes.firstDifference !== undefined ? [`first difference at byte ${changes.firstDifference}`] : []),
  ]
}

/** `route switched from deepseek/deepseek-chat to deepseek/deepseek-reasoner by /model` */
export function describeRouteSwitch({ provider, model, from, by }: AgentRouteSwitch): string {
  return `route switched ${from ? `from ${from.provider}/${from.model} ` : ''}to ${provider}/${model}${by ? ` by ${by}` : ''}`
}

/**
 * The attribution of a `change` header in words: `request header changed (section
 * "greeter:one" of plugin "greeter" changed; first difference at byte 1234)`; a
 * resumed one's names the plugins that drifted first.
 */
export function describeHeaderChanges(changes: RequestHeaderChanges, drift?: PluginDrift): string {
  return `request header changed (${headerChangeCauses(changes, drift).join('; ') || 'no attribution'})`
}

/** The plugins a header change names: owners of what changed or was resized, and the plugins that drifted. */
export function headerChangeOwners(changes: RequestHeaderChanges | undefined, drift?: PluginDrift): string[] {
  const owners = new Set<string>()
  for (const entry of [...(changes?.sections ?? []), ...(changes?.tools ?? []), ...(changes?.resized ?? [])]) owners.add(entry.owner)
  if (drift) for (const plugin of [...drift.added, ...drift.removed, ...drift.upgraded, ...(drift.changed ?? [])]) owners.add(plugin.name)
  return [...owners]
}
