/* PTX fragments from templates/ with ${name} placeholders, embedded at build
 * time by gen/embed.c. */
#ifndef KGEN_TEMPLATE_H
#define KGEN_TEMPLATE_H

typedef struct Template {
	const char *name;
	const char *text;
} Template;

extern const Template kg_templates[]; /* terminated by {0, 0} */

#endif
