// @loom/cli as a library: composition, boot, the runner and the session store,
// for commands built on the same host (a `dev` command boots with the HMR plugin
// in `plugins`), and the terminal view of a turn.
export { boot, DEPLOYMENT_ENTRY, type BootOptions, type Deployment } from './boot.ts'
export { applyLayers, CLI_ROOT, compose, dumpRows, readLayer, resolveBundle, type ComposeOptions, type Composition, type Layer } from './compose.ts'
export { BootError, ConfigError, UsageError } from './errors.ts'
export { main, USAGE } from './cli.ts'
export { parse, type Parsed } from './parse.ts'
export { Runner, newSessionId, type CompactReport, type PromptReport, type RunnerConfig, type TurnResult, type TurnWatcher } from './runner.ts'
export { openStore, StoredSessions, type SessionSummary, type StatsReport, type VerifyReport } from './sessions.ts'
export { showTurn } from './present/turn.ts'
export { runReport, type RunReport } from './present/turn-view.ts'
export { transcript } from './present/describe.ts'
export { demoReply, DEMO_LABEL } from './demo-model.ts'
