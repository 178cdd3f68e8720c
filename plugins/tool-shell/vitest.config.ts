import { defineProject } from 'vitest/config'

export default defineProject({
  test: {
    name: '@loom/tool-shell',
    include: ['tests/**/*.test.ts'],
  },
})
