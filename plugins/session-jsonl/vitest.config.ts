import { defineProject } from 'vitest/config'

export default defineProject({
  test: {
    name: '@loom/session-jsonl',
    include: ['tests/**/*.test.ts'],
  },
})
