// Helpers every lease implementation needs, whatever stores the lease.
import { basename } from 'node:path'

/** Whether a process with this pid exists on this host. */
export function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    // EPERM: it exists, it is just not ours to signal.
    return (error as NodeJS.ErrnoException).code !== 'ESRCH'
  }
}

/** The default label of a lease holder: this process's command line, shortened. */
export function defaultLeaseCommand(argv: readonly string[] = process.argv): string {
  const words = [basename(argv[1] ?? 'node'), ...argv.slice(2)]
  const text = words.join(' ')
  return text.length > 80 ? text.slice(0, 79) + '…' : text
}
