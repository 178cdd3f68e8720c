// What `loom prompt --diff A B` compares: the manifest a side names. A stored
// session's request (`ID`, a unique prefix or `last`, `:N` for its Nth request),
// this deployment's next request for a new agent (`deployment`), or that of this
// deployment with one more layer file (a path ending in .yml or .yaml).
import type { Manifest } from '@loom/agent-loop'
import { resolve } from 'node:path'
import type { Context } from './context.ts'
import { UsageError } from './errors.ts'
import type { Runner } from './runner.ts'

export interface NamedManifest {
  /** How the side is shown: `session 2026… request 3 of 5`, `deployment`, `deployment + with-mcp.yml`. */
  label: string
  manifest: Manifest
}

export async function manifestOf(ref: string, { parsed, cwd, layers, log }: Context): Promise<NamedManifest> {
  const layer = /\.ya?ml$/.test(ref) ? ref : undefined
  if (ref === 'deployment' || layer !== undefined) {
    const [{ boot }, { headlessApprover }] = await Promise.all([import('./boot.ts'), import('./approve.ts')])
    const patches = layer === undefined ? layers.patches : [...layers.patches, resolve(cwd, layer)]
    const deployment = await boot({ ...layers, patches, log, plugins: [headlessApprover()] })
    try {
      const runner = deployment.root.get('runner') as Runner | undefined
      if (!runner) throw new UsageError(`${layer ?? 'the deployment'}: no runner row, so no request to show`)
      return { label: layer === undefined ? 'deployment' : `deployment + ${layer}`, manifest: (await runner.prompt({ ...parsed, cwd })).manifest }
    } finally {
      await deployment.dispose()
    }
  }
  const [session, step] = splitRef(ref)
  const { openStore } = await import('./sessions.ts')
  const store = await openStore({ ...layers, log })
  try {
    const id = await store.resolve(session, cwd)
    const report = await store.manifest(id, step)
    return { label: `session ${id} request ${report.step} of ${report.steps}`, manifest: report.manifest }
  } finally {
    await store.dispose()
  }
}

/** `last:3` → ['last', 3]; `2026…` → ['2026…', undefined]. */
function splitRef(ref: string): [string, number | undefined] {
  const colon = ref.lastIndexOf(':')
  if (colon < 0) return [ref, undefined]
  const step = Number(ref.slice(colon + 1))
  if (!Number.isSafeInteger(step) || step < 1) throw new UsageError(`prompt --diff: "${ref}": after the colon comes the request number (1, 2, …)`)
  return [ref.slice(0, colon), step]
}
