import { defineProject } from 'vitest/config'

export default defineProject({
  test: {
    name: '@loom/testkit',
    include: ['tests/**/*.test.ts'],
  },
})
