// `loom config`: the deployment's rows, composed from its layers, as they boot;
// exit 1 when a config value or key in them would fail the boot.
import { nothing, type PlanMaker } from '../context.ts'

export const plan: PlanMaker = () =>
  nothing(async ({ parsed, io, layers, cwd }) => {
    const [{ compose }, { printConfig }, { untrustedLayers, refusal }, { configProblems }] = await Promise.all([
      import('../compose.ts'),
      import('../present/config.ts'),
      import('../trust.ts'),
      import('../config-check.ts'),
    ])
    const warn = (text: string) => io.stderr.write(`loom: warning: ${text}\n`)
    const composition = compose({ ...layers, warn })
    // Printing evaluates nothing, so an untrusted layer is shown (to review it), with what the commands that run it say.
    const untrusted = untrustedLayers(composition, cwd)
    for (const layer of untrusted) warn(refusal(layer))
    printConfig(io, composition, parsed.json)
    // What run and prompt would refuse at boot, said here too (after the rows, to read them by).
    const problems = await configProblems(composition, cwd, { pathsTrusted: untrusted.length === 0 })
    for (const problem of problems) io.stderr.write(`loom: ${problem}\n`)
    return problems.length ? 1 : 0
  })
