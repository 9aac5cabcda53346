/* dashboard.S - web/dashboard.html in the binary, so that eftd serves its
 * dashboard with nothing to install beside it (admin.h names it). */
	.section .rodata
	.global eft_dashboard_html
	.global eft_dashboard_html_end
	.type eft_dashboard_html, @object
eft_dashboard_html:
	.incbin "web/dashboard.html"
eft_dashboard_html_end:
	.byte 0
	.section .note.GNU-stack, "", @progbits
