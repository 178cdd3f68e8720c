import { defineProject } from 'vitest/config'

export default defineProject({
  test: {
    name: '@loom/scope',
    include: ['tests/**/*.test.ts'],
  },
})
