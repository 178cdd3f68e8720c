import { defineProject } from 'vitest/config'

export default defineProject({
  test: {
    name: '@loom/demo',
    include: ['tests/**/*.test.ts'],
    testTimeout: 30_000,
  },
})
