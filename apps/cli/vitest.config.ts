import { defineProject } from 'vitest/config'

export default defineProject({
  test: {
    name: '@loom/cli',
    include: ['tests/**/*.test.ts'],
    testTimeout: 60_000,
  },
})
