import { defineProject } from 'vitest/config'

export default defineProject({
  test: {
    name: '@loom/memory',
    include: ['tests/**/*.test.ts'],
  },
})
