import { execFileSync } from 'node:child_process'
import { readlinkSync } from 'node:fs'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { userText } from '@loom/llm'
import { defineTool } from '@loom/tools'
import { createHost, type Host } from '@loom/testkit'
import * as time from '../src/index.ts'
import { formatTime, hostTimeZone, zoneOfLink } from '../src/index.ts'

describe('formatTime', () => {
  const instant = new Date('2026-03-04T05:06:07.890Z')

  it.each([
    ['UTC', '2026-03-04T05:06:07+00:00'],
    ['Europe/Berlin', '2026-03-04T06:06:07+01:00'],
    ['America/New_York', '2026-03-04T00:06:07-05:00'],
    ['America/Los_Angeles', '2026-03-03T21:06:07-08:00'],
    ['Asia/Kolkata', '2026-03-04T10:36:07+05:30'],
    ['Asia/Kathmandu', '2026-03-04T10:51:07+05:45'],
    ['America/St_Johns', '2026-03-04T01:36:07-03:30'],
    ['Pacific/Kiritimati', '2026-03-04T19:06:07+14:00'],
  ])('%s → %s', (zone, expected) => {
    expect(formatTime(instant, zone)).toBe(expected)
  })

  it('follows daylight saving time', () => {
    expect(formatTime(new Date('2026-07-04T12:00:00Z'), 'Europe/Berlin')).toBe('2026-07-04T14:00:00+02:00')
    expect(formatTime(new Date('2026-07-04T12:00:00Z'), 'America/New_York')).toBe('2026-07-04T08:00:00-04:00')
    // Midnight local, and the second before the spring-forward jump.
    expect(formatTime(new Date('2026-03-28T23:00:00Z'), 'Europe/Berlin')).toBe('2026-03-29T00:00:00+01:00')
    expect(formatTime(new Date('2026-03-29T00:59:59Z'), 'Europe/Berlin')).toBe('2026-03-29T01:59:59+01:00')
    expect(formatTime(new Date('2026-03-29T01:00:00Z'), 'Europe/Berlin')).toBe('2026-03-29T03:00:00+02:00')
  })

  it('round-trips: the text parses back to the same second', () => {
    for (const zone of ['Asia/Kathmandu', 'America/St_Johns', 'Australia/Lord_Howe']) {
      for (let t = Date.UTC(2026, 0, 1); t < Date.UTC(2027, 0, 1); t += 7 * 86_400_000 + 3_600_123) {
        expect(Date.parse(formatTime(new Date(t), zone))).toBe(Math.floor(t / 1000) * 1000)
      }
    }
  })

  it('throws a RangeError for an unknown zone', () => {
    expect(() => formatTime(instant, 'Mars/Olympus_Mons')).toThrow(RangeError)
  })
})

describe('the host zone without Intl', () => {
  it('is the zone the /etc/localtime link names, UTC under its aliases', () => {
    expect(zoneOfLink('/usr/share/zoneinfo/Europe/Berlin')).toBe('Europe/Berlin')
    expect(zoneOfLink('../usr/share/zoneinfo/America/Argentina/Buenos_Aires')).toBe('America/Argentina/Buenos_Aires')
    expect(zoneOfLink('/usr/share/zoneinfo/posix/Asia/Kolkata')).toBe('Asia/Kolkata')
    expect(zoneOfLink('/var/db/timezone/zoneinfo/Etc/GMT+5')).toBe('Etc/GMT+5')
    expect(zoneOfLink('/usr/share/zoneinfo/Etc/UTC')).toBe('UTC')
    expect(zoneOfLink('/usr/share/zoneinfo/Universal')).toBe('UTC')
    expect(zoneOfLink('/etc/my-localtime')).toBeUndefined()
  })

  // The host's local fields against Intl for the same zone, over a year of
  // daylight saving changes (Lord Howe's are of 30 minutes): in a process whose
  // TZ names the zone, as a host's link would.
  it.each(['Europe/Berlin', 'America/St_Johns', 'Australia/Lord_Howe', 'Asia/Kathmandu'])('formatLocalTime agrees with formatTime in %s', zone => {
    const script = `
      const { formatLocalTime, formatTime } = await import(${JSON.stringify(new URL('../src/index.ts', import.meta.url).href)})
      const wrong = []
      for (let t = Date.UTC(2026, 0, 1); t < Date.UTC(2027, 0, 1); t += 86_400_000 / 4 + 60_123)
        if (formatLocalTime(new Date(t)) !== formatTime(new Date(t), ${JSON.stringify(zone)})) wrong.push(new Date(t).toISOString())
      console.log(JSON.stringify(wrong))`
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { env: { ...process.env, TZ: zone }, encoding: 'utf8' })
    expect(JSON.parse(out)).toEqual([])
  })

  it('the default context constructs no Intl formatter when the host has a zone link', async ({ skip }) => {
    let linked = false
    try {
      linked = process.env.TZ === undefined && zoneOfLink(readlinkSync('/etc/localtime')) !== undefined
    } catch {}
    if (!linked) skip('this host has no /etc/localtime zone link, or TZ is set')
    const host = await createHost()
    const constructed = vi.spyOn(Intl, 'DateTimeFormat')
    try {
      const mounted = await host.mount(time)
      const zone = hostTimeZone()
      expect((await mounted.delta()).contexts[0].text).toBe(`Current time: ${time.formatLocalTime(new Date(), 'minute')} (${zone})`)
      expect(constructed).not.toHaveBeenCalled()
    } finally {
      constructed.mockRestore()
      await host.dispose()
    }
  })
})

describe('the plugin', () => {
  let host: Host

  beforeEach(async () => {
    // Only Date is faked: the host's own timers and promises run for real.
    vi.useFakeTimers({ toFake: ['Date'] })
    vi.setSystemTime(new Date('2026-03-04T05:06:07Z'))
    host = await createHost()
  })

  afterEach(async () => {
    await host.dispose()
    vi.useRealTimers()
  })

  it('adds only the runtime context runtime:time (order 10, step-stable) with the exact text', async () => {
    const mounted = await host.mount(time, { timeZone: 'Europe/Berlin' })
    const delta = await mounted.delta()
    expect(delta.sections).toEqual([])
    expect(delta.tools).toEqual([])
    expect(delta.variables).toEqual([])
    expect(delta.contexts).toEqual([
      {
        name: 'runtime:time',
        order: 10,
        stability: 'step',
        text: 'Current time: 2026-03-04T06:06+01:00 (Europe/Berlin)',
        rendered: 'Current time: 2026-03-04T06:06+01:00 (Europe/Berlin)',
      },
    ])
  })

  it('reads the clock on every assembly', async () => {
    const mounted = await host.mount(time, { timeZone: 'Asia/Kolkata', precision: 'second' })
    expect((await mounted.delta()).contexts[0].text).toBe('Current time: 2026-03-04T10:36:07+05:30 (Asia/Kolkata)')
    vi.setSystemTime(new Date('2026-12-31T23:59:59Z'))
    expect((await mounted.delta()).contexts[0].text).toBe('Current time: 2027-01-01T05:29:59+05:30 (Asia/Kolkata)')
  })

  it('to the minute by default: the text changes only when the minute ticks', async () => {
    const mounted = await host.mount(time, { timeZone: 'UTC' })
    expect((await mounted.delta()).contexts[0].text).toBe('Current time: 2026-03-04T05:06+00:00 (UTC)')
    vi.setSystemTime(new Date('2026-03-04T05:06:59Z'))
    expect((await mounted.delta()).contexts[0].text).toBe('Current time: 2026-03-04T05:06+00:00 (UTC)')
    vi.setSystemTime(new Date('2026-03-04T05:07:00Z'))
    expect((await mounted.delta()).contexts[0].text).toBe('Current time: 2026-03-04T05:07+00:00 (UTC)')
  })

  it('to the hour on request', async () => {
    const mounted = await host.mount(time, { timeZone: 'Asia/Kathmandu', precision: 'hour' })
    expect((await mounted.delta()).contexts[0].text).toBe('Current time: 2026-03-04T10:00+05:45 (Asia/Kathmandu)')
  })

  it('defaults to the host time zone', async () => {
    const mounted = await host.mount(time)
    const zone = hostTimeZone()
    expect((await mounted.delta()).contexts[0].text).toBe(`Current time: ${formatTime(new Date(), zone, 'minute')} (${zone})`)
  })

  it('rejects an unknown time zone, naming the config key', async () => {
    await expect(host.mount(time, { timeZone: 'Mars/Olympus_Mons' })).rejects.toThrow(/unknown time zone "Mars\/Olympus_Mons" \(config timeZone\)/)
  })

  it('reaches the model as a user-role snapshot, never in the system text, and a new time is a new snapshot', async () => {
    await host.mount(time, { timeZone: 'UTC', precision: 'second' })
    const script = host.scriptedModel(['first', 'second'])
    const run = await host.run('hello')
    vi.setSystemTime(new Date('2026-03-04T05:07:00Z'))
    run.agent.followup(userText('again'))
    await run.agent.idle()
    const [first, second] = script.requests
    expect(first.system).toBe(second.system)
    expect(first.system).not.toContain('Current time')
    const texts = (request: typeof first) => JSON.stringify(request.messages)
    expect(texts(first)).toContain('Current time: 2026-03-04T05:06:07+00:00 (UTC)')
    expect(texts(second)).toContain('Current time: 2026-03-04T05:06:07+00:00 (UTC)')
    expect(texts(second)).toContain('Current time: 2026-03-04T05:07:00+00:00 (UTC)')
    // The second request extends the first: the earlier messages are untouched.
    expect(texts(second).startsWith(texts(first).slice(0, -1))).toBe(true)
  })

  it.each([
    ['minute', 1],
    ['second', 2],
  ] as const)('a tool loop whose steps are 30 s apart logs %s-precision snapshots: %i', async (precision, expected) => {
    await host.mount(time, { timeZone: 'UTC', precision })
    // A tool that takes 30 seconds of clock time.
    await host.mount({
      name: 'slow-tool',
      inject: ['tools'],
      apply: (ctx: any) =>
        ctx.tools.register(
          defineTool({
            name: 'slow',
            description: 'Takes 30 s.',
            parameters: { type: 'object', properties: {} },
            execute: () => {
              vi.setSystemTime(Date.now() + 30_000)
              return 'ok'
            },
          }),
        ),
    })
    host.scriptedModel([{ toolCalls: [{ name: 'slow', arguments: {} }] }, 'done'])
    const run = await host.run('hello')
    expect(run.requests).toHaveLength(2)
    const snapshots = run.agent.session.events.filter(event => event.type === 'user/message' && (event.data as any).source.form === 'snapshot')
    expect(snapshots).toHaveLength(expected)
  })

  it('leaves nothing after dispose', async () => {
    const mounted = await host.mount(time, { timeZone: 'UTC' })
    await mounted.delta()
    await mounted.dispose()
    await host.assertZeroResidue(mounted)
  })
})
