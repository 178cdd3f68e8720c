// @loom/cli as a library: composition, boot and the runner, for commands built on
// the same host (a `dev` command boots with the HMR plugin in `plugins`).
export { boot, DEPLOYMENT_ENTRY, type BootOptions, type Deployment } from './boot.ts'
export { applyLayers, CLI_ROOT, compose, dumpRows, readLayer, resolveBundle, type ComposeOptions, type Composition, type Layer } from './compose.ts'
export { BootError, ConfigError, PromptError, UsageError } from './errors.ts'
export { main, parse, USAGE } from './cli.ts'
export { Runner, newSessionId, runReport, type PromptReport, type RunReport, type RunnerConfig, type VerifyReport } from './runner.ts'
export { demoReply, DEMO_LABEL } from './demo-model.ts'
export { transcript } from './describe.ts'
