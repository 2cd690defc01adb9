"""The fork server: kernels forked from a template process per framework that imported it once
(:mod:`.server`, with jupyter_client's provisioner), the template process and a forked kernel as
jupyter_client's Popen (:mod:`.forked`), templates kept warm between builds (:mod:`.warm`). The
template's own program is :mod:`livecells.kernel_side.template`."""
