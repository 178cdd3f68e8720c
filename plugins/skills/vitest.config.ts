import { defineProject } from 'vitest/config'

export default defineProject({
  test: {
    name: '@loom/skills',
    include: ['tests/**/*.test.ts'],
  },
})
