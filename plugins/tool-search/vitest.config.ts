import { defineProject } from 'vitest/config'

export default defineProject({
  test: {
    name: '@loom/tool-search',
    include: ['tests/**/*.test.ts'],
  },
})
