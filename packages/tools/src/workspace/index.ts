// `@loom/tools/workspace`: what every tool that touches files shares: the
// workspace root of a call, confinement of the paths a model gives, and the
// text helpers for showing file content (binary sniffing, cuts, plurals).
export { displayPath, isInside, OutsideWorkspaceError, realpathLoose, resolveInWorkspace, workspaceRootOf, type WorkspacePath } from './paths.ts'
export { cutBytes, cutChars, looksBinary, plural, SNIFF_BYTES } from './text.ts'
