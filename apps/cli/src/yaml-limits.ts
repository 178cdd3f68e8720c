// Bounds on the YAML of a config layer. js-yaml shares one object among all
// the aliases of an anchor, so parsing an alias bomb (each level repeating the
// one before nine times) is quick and small; whatever walks or copies the tree
// after it (patches, `!!js` interpolation, config validation) meets every
// repeat, and nine levels are hundreds of millions of values. The document's
// size and what its aliases add are checked before anything else sees it.
import yaml from 'js-yaml'
import { ConfigError } from './errors.ts'

/** The largest layer file, in bytes (a deployment's layer is a few KiB). */
export const MAX_LAYER_BYTES = 1024 * 1024

/** How many values (scalars, lists, mappings) the aliases of one layer may add to it, counted at every use. */
export const MAX_ALIAS_VALUES = 100_000

/**
 * `yaml.load(text)` for the layer `file`, refused with a ConfigError naming the
 * file (and the line of the repeated node) when the text is larger than
 * MAX_LAYER_BYTES, when its aliases add more than MAX_ALIAS_VALUES values, or
 * when an alias refers to the node that contains it. Syntax errors are thrown
 * as js-yaml's YAMLException.
 */
export function loadLayerYaml(text: string, file: string, options: Omit<yaml.LoadOptions, 'filename' | 'listener'> = {}): unknown {
  const bytes = Buffer.byteLength(text)
  if (bytes > MAX_LAYER_BYTES) {
    throw new ConfigError(`${file} is ${bytes} bytes, more than the ${MAX_LAYER_BYTES}-byte limit for a config layer`)
  }
  // The line where each list and mapping starts (js-yaml keeps no positions in its result).
  const lines = new Map<object, number>()
  const starts: number[] = []
  const data = yaml.load(text, {
    ...options,
    filename: file,
    listener(event, state) {
      if (event === 'open') return void starts.push(state.line)
      const line = starts.pop()!
      if (isCollection(state.result) && !lines.has(state.result)) lines.set(state.result, line)
    },
  })
  checkAliases(data, file, lines)
  return data
}

function isCollection(value: unknown): value is object {
  return typeof value === 'object' && value !== null && !(value instanceof Date)
}

function childrenOf(node: object): unknown[] {
  return Array.isArray(node) ? node : Object.values(node)
}

/**
 * Walks the tree once, each collection's children before it, keeping the
 * number of values under every collection. A collection met again is an alias
 * use: its values count once more, and past MAX_ALIAS_VALUES the walk stops.
 * A collection met again before it is finished contains its own alias.
 */
function checkAliases(root: unknown, file: string, lines: Map<object, number>): void {
  if (!isCollection(root)) return
  const at = (node: object) => (lines.has(node) ? ` at line ${lines.get(node)! + 1}` : '')
  const sizes = new Map<object, number>()
  let added = 0
  const stack: { node: object; children: unknown[]; next: number; size: number }[] = []
  const open = new Set<object>()
  const enter = (node: object) => {
    open.add(node)
    stack.push({ node, children: childrenOf(node), next: 0, size: 1 })
  }
  enter(root)
  while (stack.length) {
    const frame = stack.at(-1)!
    if (frame.next === frame.children.length) {
      stack.pop()
      open.delete(frame.node)
      sizes.set(frame.node, frame.size)
      if (stack.length) stack.at(-1)!.size += frame.size
      continue
    }
    const child = frame.children[frame.next++]
    if (!isCollection(child)) {
      frame.size += 1
    } else if (sizes.has(child)) {
      const size = sizes.get(child)!
      added += size
      frame.size += size
      if (added > MAX_ALIAS_VALUES) {
        throw new ConfigError(
          `${file}: YAML aliases expand it by more than ${MAX_ALIAS_VALUES} values, the limit for a config layer (the node${at(child)}, ${size} values, is repeated by aliases)`,
        )
      }
    } else if (open.has(child)) {
      throw new ConfigError(`${file}: a YAML alias refers to a node that contains it${at(child)}`)
    } else {
      enter(child)
    }
  }
}
