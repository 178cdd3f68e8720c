// The TypeScript snippets of the docs cannot drift from the API: every ```ts
// (or ```typescript) block of the README, docs/ and every package README is
// typechecked as an ES module with the options of tsconfig.base.json, all in one
// program (the workspace's sources are read and bound once).
//
// Where a snippet lives: a virtual file (nothing is written to disk) in a
// __snippets__ folder next to its document, so its imports resolve as they would
// there; an import nothing there provides (`@loom/plugin` from docs/) resolves as
// from inside the workspace's packages. A snippet whose first line is a path
// comment (`// src/index.ts`) is served at that path under __snippets__, so a
// document's test snippet can import its plugin snippet (`'../src/index.ts'`).
//
// What a snippet may use without declaring it (the prelude below, the same for
// all): `ctx` and `root` (a plugin's context and a root context, with every
// first-party service on them), `agent`, `session`, `assembly` (an assembled
// prompt), `messages`, `cwd` and `signal`. A snippet's own declaration of such a
// name shadows it. Anything else, the snippet imports or declares. A block that
// shows a shape rather than code is fenced as ```text.
//
// One program has one Context: a service a snippet forgets to import (the
// `ctx.systemPrompt` that `@loom/plugin` brings) is still there, from the prelude.
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { isBuiltin } from 'node:module'
import { basename, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

const REPO = fileURLToPath(new URL('../../..', import.meta.url))

const PRELUDE = `// Names the snippets of the docs use without declaring them.
import type { Agent } from '@loom/agent-loop'
import type { Message } from '@loom/llm'
import type { Context } from '@loom/plugin'
import type { Session } from '@loom/session'
import type { PromptAssembly } from '@loom/system-prompt'
// Every first-party service on ctx (their modules add them to Cordis's Context).
import '@loom/compaction'
import '@loom/session-jsonl'
import '@loom/token-meter'

declare global {
  /** A plugin's context in a deployment. */
  const ctx: Context
  /** The root context of a deployment, or of a host a snippet builds. */
  const root: Context
  const agent: Agent
  const session: Session
  /** An assembled prompt (\`ctx.systemPrompt.assemble()\`). */
  const assembly: PromptAssembly
  const messages: Message[]
  const cwd: string
  const signal: AbortSignal
}
`

const docs = [
  'README.md',
  ...readdirSync(join(REPO, 'docs')).map(name => join('docs', name)),
  ...['packages', 'plugins', 'apps'].flatMap(dir => readdirSync(join(REPO, dir)).map(name => join(dir, name, 'README.md'))),
].filter(file => file.endsWith('.md') && existsSync(join(REPO, file)))

interface Snippet {
  /** `docs/plugin-authoring.md #3` */
  name: string
  doc: string
  /** Line of the document where the code starts (1-based). */
  line: number
  /** The virtual file it is checked as. */
  path: string
  code: string
}

const snippets: Snippet[] = docs.flatMap(doc => {
  const text = readFileSync(join(REPO, doc), 'utf8')
  const folder = join(REPO, dirname(doc), '__snippets__')
  return [...text.matchAll(/^```(?:ts|typescript)\n([\s\S]*?)^```/gm)].map((match, index) => {
    const code = match[1]
    const named = /^\/\/ (\S+\.ts)\n/.exec(code)?.[1]
    return {
      name: `${doc} #${index + 1}`,
      doc,
      line: text.slice(0, match.index).split('\n').length + 1,
      path: join(folder, named ?? `${basename(doc, '.md')}-${index + 1}.ts`),
      code,
    }
  })
})

const PRELUDE_PATH = join(REPO, 'docs', '__snippets__', 'prelude.ts')
const virtual = new Map([[PRELUDE_PATH, PRELUDE], ...snippets.map(snippet => [snippet.path, snippet.code] as const)])

/** The workspace's package folders: where an import no package near the snippet provides resolves from. */
const PACKAGES = ['packages', 'plugins', 'apps'].flatMap(dir =>
  readdirSync(join(REPO, dir))
    .map(name => join(REPO, dir, name))
    .filter(folder => existsSync(join(folder, 'package.json'))),
)

function check(): Map<string, readonly ts.Diagnostic[]> {
  const base = ts.readConfigFile(join(REPO, 'tsconfig.base.json'), ts.sys.readFile)
  const { options: baseOptions, errors } = ts.convertCompilerOptionsFromJson(base.config?.compilerOptions, REPO)
  if (base.error || errors.length > 0) throw new Error(ts.formatDiagnostics([base.error ?? [], errors].flat(), ts.createCompilerHost({})))
  const options: ts.CompilerOptions = {
    ...baseOptions,
    noUnusedLocals: false,
    // Every snippet is a module, even one without an import: its names are its own.
    moduleDetection: ts.ModuleDetectionKind.Force,
    customConditions: ['loom-source'],
  }
  const host = ts.createCompilerHost(options)
  const { getSourceFile, fileExists, readFile } = host
  const folders = new Set([...virtual.keys()].flatMap(file => [...ancestors(file)]))
  host.fileExists = file => virtual.has(file) || fileExists(file)
  host.directoryExists = folder => folders.has(folder) || ts.sys.directoryExists(folder)
  host.readFile = file => virtual.get(file) ?? readFile(file)
  host.getSourceFile = (file, language, onError, create) => {
    const text = virtual.get(file)
    return text === undefined ? getSourceFile(file, language, onError, create) : ts.createSourceFile(file, text, language)
  }
  const cache = ts.createModuleResolutionCache(REPO, file => file, options)
  const resolve = (name: string, from: string, mode: ts.ResolutionMode) => ts.resolveModuleName(name, from, options, host, cache, undefined, mode)
  host.resolveModuleNameLiterals = (literals, from, _redirected, _options, file) =>
    literals.map(literal => {
      const name = literal.text
      const mode = ts.getModeForUsageLocation(file, literal, options)
      const found = resolve(name, from, mode)
      if (found.resolvedModule || name.startsWith('.') || isBuiltin(name)) return found
      for (const folder of PACKAGES) {
        const there = resolve(name, join(folder, 'index.ts'), mode)
        if (there.resolvedModule) return there
      }
      return found
    })
  const program = ts.createProgram([...virtual.keys()], options, host)
  const diagnostics = new Map<string, readonly ts.Diagnostic[]>()
  for (const file of virtual.keys()) {
    const source = program.getSourceFile(file)!
    diagnostics.set(file, [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)])
  }
  diagnostics.set('', [...program.getOptionsDiagnostics(), ...program.getGlobalDiagnostics()])
  return diagnostics
}

/** The folders above `file`, up to the repository. */
function* ancestors(file: string) {
  for (let folder = dirname(file); folder.length >= REPO.length; folder = dirname(folder)) yield folder
}

/** `docs/plugin-authoring.md:42 (line 3 of the snippet): message`. */
function describeDiagnostic(diagnostic: ts.Diagnostic, snippet?: Snippet): string {
  const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n')
  if (!diagnostic.file || diagnostic.start === undefined) return message
  const line = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start).line
  return snippet ? `${snippet.doc}:${snippet.line + line} (line ${line + 1} of the snippet): ${message}` : `${diagnostic.file.fileName}:${line + 1}: ${message}`
}

describe('TypeScript snippets of the docs', () => {
  // One program for every snippet: the workspace's sources are read and bound once.
  let diagnostics: Map<string, readonly ts.Diagnostic[]> | undefined
  const of = (file: string) => (diagnostics ??= check()).get(file)!

  it('there are some to check, each at its own path', () => {
    expect(snippets.length).toBeGreaterThan(30)
    expect(virtual.size).toBe(snippets.length + 1)
  })

  it('the prelude and the options are sound', () => {
    expect([...of(''), ...of(PRELUDE_PATH)].map(diagnostic => describeDiagnostic(diagnostic))).toEqual([])
  })

  for (const snippet of snippets) {
    it(snippet.name, () => {
      expect(of(snippet.path).map(diagnostic => describeDiagnostic(diagnostic, snippet))).toEqual([])
    })
  }
})
