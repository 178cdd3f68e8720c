// `@loom/tools/workspace`: what every tool that touches files shares: the
// workspace root of a call, confinement of the paths a model gives, and the
// text helpers for showing file content (binary sniffing, cuts, plurals), and
// the checks of the read rules (what no tool may read: credential stores).
export { displayPath, isInside, OutsideWorkspaceError, realpathLoose, resolveInWorkspace, workspaceRootOf, type WorkspacePath } from './paths.ts'
export { cutBytes, cutChars, looksBinary, plural, SNIFF_BYTES } from './text.ts'
export { allowedBelow, ReadDeniedError, readDenial, rulesFor, type ReadRule, type ReadRules } from './read-policy.ts'
