// Search jobs as the tools build them, for the tests that hand one to an engine directly.
import type { GrepJob, WalkJob } from '../src/scan.ts'

/** A walk of everything under `start` that the ignore rules keep, with no read rules. */
export function plainWalk(start: string, display: string, root: string): WalkJob {
  return {
    start,
    display,
    root,
    names: [],
    hidden: false,
    ignoreFiles: undefined,
    maxDepth: Number.POSITIVE_INFINITY,
    reads: { deny: [], allow: [] },
    targetReads: { deny: [], allow: [] },
  }
}

/** A grep of `source` (flags `u`) over `walk`, no byte cap, lines cut at 100 bytes. */
export function grepJob(walk: WalkJob, source: string, limits: Pick<GrepJob, 'maxMatches' | 'blockBytes'>): GrepJob {
  return { kind: 'grep', files: { walk }, source, flags: 'u', maxBytes: Number.POSITIVE_INFINITY, maxLineBytes: 100, ...limits }
}
