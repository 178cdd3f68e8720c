// Cost of one model step's prompt work: assemble() for an agent scope plus
// renderPrompt() and the runtime-context snapshot, at a realistic deployment size
// and at multiples of it. `compare.ts` runs the same against another checkout.
import { Context } from '@deepseek-ai/cordis'
import { createScope } from '@loom/scope'
import SystemPrompt, { renderContextSnapshot, renderPrompt } from '@loom/system-prompt'

/** The modules a deployment is built from: this checkout's, or another one's. */
export interface PromptModules {
  Context: typeof Context
  createScope: typeof createScope
  SystemPrompt: typeof SystemPrompt
  renderPrompt: typeof renderPrompt
  renderContextSnapshot: typeof renderContextSnapshot
}

const LOCAL: PromptModules = { Context, createScope, SystemPrompt, renderPrompt, renderContextSnapshot }

export interface Size {
  sections: number
  tools: number
  providers: number
  variables: number
  contexts: number
  shadowed: number
}

export const BASE: Size = { sections: 30, tools: 40, providers: 8, variables: 10, contexts: 5, shadowed: 3 }

const scaled = (scale: number): Size => ({ ...BASE, sections: BASE.sections * scale, tools: BASE.tools * scale })

/** One step of a deployment of `size`: assemble for the agent, then render. */
export async function deployment(size: Size, modules: PromptModules = LOCAL): Promise<() => Promise<void>> {
  const { Context, SystemPrompt, createScope, renderPrompt, renderContextSnapshot } = modules
  const root = new Context()
  await root.plugin(SystemPrompt, { persona: 'You work in {{cwd}} with {{model}}.' })
  const plugins = await Promise.all(
    Array.from({ length: size.providers }, (_, p) => root.plugin({ name: `plugin-${p}`, inject: ['systemPrompt'], apply() {} })),
  )
  const ctxOf = (i: number) => plugins[i % plugins.length].ctx

  // Two built-ins are part of the count.
  for (let i = 0; i < size.sections - 2; i++) {
    ctxOf(i).systemPrompt.section({
      name: `section-${i}`,
      order: 100 + i,
      text: i % 3 ? `Guidance ${i}: keep edits small; read before you write; run the tests in {{cwd}}.` : () => `Dynamic guidance ${i}.`,
    })
  }
  for (let p = 0; p < size.providers; p++) {
    const schemas = Array.from({ length: size.tools / size.providers }, (_, t) => ({
      name: `tool_${p}_${t}`,
      description: `Tool ${t} of provider ${p}.`,
      parameters: { type: 'object', properties: { path: { type: 'string' }, limit: { type: 'integer' } }, required: ['path'] },
    }))
    ctxOf(p).systemPrompt.tools(() => ({ schemas }))
  }
  for (let v = 0; v < size.variables; v++) {
    const name = ['cwd', 'model'][v] ?? `var_${v}`
    ctxOf(v).systemPrompt.variable(name, () => `value-${v}`)
  }
  for (let c = 0; c < size.contexts; c++) {
    ctxOf(c).systemPrompt.context({ name: `context-${c}`, order: c, text: `Fact ${c}: {{var_${2 + (c % (size.variables - 2))}}}` })
  }

  const agent = {}
  const scope = createScope(plugins[0].ctx, agent)
  for (let s = 0; s < size.shadowed; s++) {
    scope.ctx.systemPrompt.section({ name: `section-${s}`, order: 100 + s, text: `Agent override ${s}.` })
  }
  const sp = root.systemPrompt
  return async () => {
    const assembly = await sp.assemble({ scope: agent })
    renderPrompt(assembly)
    renderContextSnapshot(assembly)
  }
}

export interface Figure extends Size {
  bench: string
  iterations: number
  median_us: number
  p90_us: number
}

export async function benchAssemble(iterations = 2000, scales = [1, 3, 10]): Promise<Figure[]> {
  const figures: Figure[] = []
  for (const scale of scales) {
    const size = scaled(scale)
    const step = await deployment(size)
    for (let i = 0; i < Math.min(200, iterations); i++) await step()
    const samples: number[] = []
    for (let i = 0; i < iterations; i++) {
      const start = process.hrtime.bigint()
      await step()
      samples.push(Number(process.hrtime.bigint() - start) / 1000)
    }
    samples.sort((a, b) => a - b)
    figures.push({
      bench: 'system-prompt/assemble+render',
      ...size,
      iterations,
      median_us: round(samples[Math.floor(samples.length / 2)]),
      p90_us: round(samples[Math.floor(samples.length * 0.9)]),
    })
  }
  return figures
}

const round = (n: number) => Math.round(n * 10) / 10
