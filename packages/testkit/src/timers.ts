import { AsyncLocalStorage, createHook } from 'node:async_hooks'

/** Node's `Timeout` object, with the internal fields the residue report reads. */
export interface TimeoutHandle {
  hasRef(): boolean
  _destroyed?: boolean
  _repeat?: number | null
  _idleTimeout?: number
}

/** Collects the timers created while code runs on behalf of one plugin. */
export interface TimerSink {
  timers: WeakRef<TimeoutHandle>[]
}

const attribution = new AsyncLocalStorage<TimerSink>()
let users = 0
const hook = createHook({
  init(_id, type, _trigger, resource) {
    if (type !== 'Timeout') return
    attribution.getStore()?.timers.push(new WeakRef(resource as TimeoutHandle))
  },
})

/** Starts timer attribution (reference counted: one per host); returns its stop. */
export function trackTimers(): () => void {
  if (users++ === 0) hook.enable()
  let stopped = false
  return () => {
    if (stopped) return
    stopped = true
    if (--users === 0) hook.disable()
  }
}

/** Runs `task` so that every timer it (or its async continuations) creates is recorded in `sink`. */
export function attributeTimers<T>(sink: TimerSink, task: () => T): T {
  return attribution.run(sink, task)
}

/** Timers of the sink that are still scheduled (neither cleared nor fired). */
export function liveTimers(sink: TimerSink): TimeoutHandle[] {
  return sink.timers.map(ref => ref.deref()).filter((timer): timer is TimeoutHandle => timer !== undefined && timer._destroyed !== true)
}

/** Active, referenced `Timeout` handles of the process. */
export function activeTimeouts(): number {
  return process.getActiveResourcesInfo().filter(kind => kind === 'Timeout').length
}

export function describeTimer(timer: TimeoutHandle): string {
  const kind = typeof timer._repeat === 'number' ? `setInterval every ${timer._repeat} ms` : `setTimeout of ${timer._idleTimeout ?? '?'} ms`
  return `${kind}${timer.hasRef() ? '' : " (unref'd)"}`
}
