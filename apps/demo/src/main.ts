// The demo: boot the deployment in loom.yml through the Cordis loader, assemble
// once, and print the request a model would receive next.
import { Context } from '@deepseek-ai/cordis'
import Include from '@deepseek-ai/cordis-plugin-include'
import Loader from '@deepseek-ai/cordis-plugin-loader'
import Logger from '@deepseek-ai/cordis-plugin-logger-console'
import { pathToFileURL } from 'node:url'
import { basename, dirname, resolve } from 'node:path'
import { renderContextSections, renderContextSnapshot, renderPrompt, type PromptAssembly } from '@loom/system-prompt'

/**
 * Boots a deployment file. A plugin that fails to import or to start (a bad
 * config value, a throwing apply) is logged by the loader and would otherwise be
 * skipped silently; here any error logged during boot fails the whole boot.
 */
export async function boot(configPath: string): Promise<Context> {
  const root = new Context()
  root.baseUrl = pathToFileURL(dirname(resolve(configPath))).href + '/'
  const failures: string[] = []
  root.logger.exporter({
    export: (message) => {
      if (message.type !== 'error') return
      const text = String(message.args[0]).split('\n').filter(line => !/^\s+at /.test(line)).join(' ')
      failures.push(`${message.name}: ${text}`)
    },
  })
  await root.plugin(Logger)
  await root.plugin(Loader)
  await root.loader.create({ name: '@deepseek-ai/cordis-plugin-include', config: { path: './' + basename(configPath) } })
  await root.loader.await()
  if (failures.length) throw new Error(`${configPath} failed to boot:\n  ${failures.join('\n  ')}`)
  if (!root.get('systemPrompt')) throw new Error(`${configPath} does not load @loom/system-prompt`)
  return root
}

export interface DemoRequest {
  system: string
  tools: { name: string; description: string; parameters: Record<string, unknown>; owner: string }[]
  runtimeContext: string
  sections: { name: string; order: number; owner: string; stability: string }[]
  contexts: { name: string; owner: string; text: string }[]
}

export function describe(assembly: PromptAssembly): DemoRequest {
  const rendered = new Map(renderContextSections(assembly).map(section => [section.name, section.text]))
  return {
    system: renderPrompt(assembly),
    tools: assembly.tools,
    runtimeContext: renderContextSnapshot(assembly),
    sections: assembly.sections.map(({ name, order, owner, stability }) => ({ name, order, owner, stability })),
    contexts: assembly.contexts.map(({ name, owner }) => ({ name, owner, text: rendered.get(name) ?? '' })),
  }
}

function print(request: DemoRequest) {
  const rule = (title: string) => `\n── ${title} ${'─'.repeat(Math.max(0, 60 - title.length))}\n`
  let out = rule('system')
  out += request.system + '\n'
  out += rule('sections (order, name, owner)')
  for (const s of request.sections) out += `${String(s.order).padStart(5)}  ${s.name}  ← ${s.owner}\n`
  out += rule(`tools, in request order (${request.tools.length})`)
  request.tools.forEach((tool, i) => { out += `${i + 1}. ${tool.name}  ← ${tool.owner}\n   ${tool.description}\n` })
  out += rule('runtime-context snapshot (user message)')
  out += (request.runtimeContext || '(none)') + '\n'
  process.stdout.write(out)
}

// `pnpm demo -- --json` passes the `--` through; a closed pipe (`| head`) is not an error.
const args = process.argv.slice(2).filter(arg => arg !== '--')
process.stdout.on('error', error => {
  if ((error as NodeJS.ErrnoException).code === 'EPIPE') process.exit(process.exitCode ?? 0)
  throw error
})
const json = args.includes('--json')
const configPath = args.find(arg => !arg.startsWith('--')) ?? new URL('../loom.yml', import.meta.url).pathname
try {
  const root = await boot(configPath)
  const request = describe(await root.systemPrompt.assemble())
  if (json) process.stdout.write(JSON.stringify(request, null, 2) + '\n')
  else print(request)
} catch (error) {
  process.stderr.write(`loom demo: ${(error as Error).message}\n`)
  process.exitCode = 1
}
