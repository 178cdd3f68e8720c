/** A problem with the deployment's configuration: the message names the file, row or key. */
export class ConfigError extends Error {
  override name = 'ConfigError'
}

/** The deployment did not start: one line per row that failed, naming the row and its module. */
export class BootError extends Error {
  readonly problems: readonly string[]
  override name = 'BootError'
  constructor(problems: readonly string[], headline = 'the deployment failed to start') {
    super(`${headline}:\n  ${problems.join('\n  ')}`)
    this.problems = problems
  }
}

/** A command was used wrongly (unknown flag, missing argument). */
export class UsageError extends Error {
  override name = 'UsageError'
}
