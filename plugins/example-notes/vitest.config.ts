import { defineProject } from 'vitest/config'

export default defineProject({
  test: {
    name: '@loom/example-notes',
    include: ['tests/**/*.test.ts'],
  },
})
