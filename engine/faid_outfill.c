/* faid_outfill: see faid_outfill.h. */
#include "faid_outfill.h"

#include "faid_outputs.h"

void faid_out_start_setup(faid_out_start *o, const faid_setup *su)
{
    const faid_config *c = &su->cfg;
    const faid_geometry *ge = &su->geom;
    uint64_t masked = 0;
    for (size_t i = 0; su->mask && i < su->npix; i++)
        masked += su->mask[i] != 0;
    o->config_hash = su->config_hash;
    o->dist = ge->dist;
    o->poni1 = ge->poni1;
    o->poni2 = ge->poni2;
    o->rot1 = ge->rot1;
    o->rot2 = ge->rot2;
    o->rot3 = ge->rot3;
    o->wavelength = ge->wavelength;
    o->pixel1 = ge->pixel1;
    o->pixel2 = ge->pixel2;
    o->rows = su->rows;
    o->cols = su->cols;
    o->detector = c->preset;
    o->npt = su->csr->npt_rad;
    o->npt_azim = su->csr2d ? su->csr2d->npt_azim : 0;
    o->unit = faid_unit_name(c->unit);
    o->split = faid_split_name(c->split);
    o->error_model = faid_error_model_name(c->error_model);
    o->solid_angle = c->solid_angle;
    o->has_polarization = c->has_polarization;
    o->polarization_factor = c->polarization_factor;
    o->has_radial_range = c->has_radial_range;
    o->radial_range[0] = c->radial_range[0];
    o->radial_range[1] = c->radial_range[1];
    o->has_azimuth_range = c->has_azimuth_range;
    o->azimuth_range[0] = c->azimuth_range[0];
    o->azimuth_range[1] = c->azimuth_range[1];
    o->has_dummy = c->has_dummy;
    o->dummy = c->dummy;
    o->delta_dummy = c->delta_dummy;
    o->normalization_factor = c->normalization_factor;
    o->empty = c->empty;
    o->mask_file = c->mask_path;
    o->dark_file = c->dark_path;
    o->flat_file = c->flat_path;
    o->masked_pixels = masked;
    o->radial = su->csr->rad_centers;
    o->azimuthal = su->csr2d ? su->csr2d->azim_centers : NULL;
    o->optional_outputs = c->output_extra;
    o->peak_params = su->csr_bg ? faid_config_put_peak_params : NULL;
    o->peak_params_arg = (void *)c;
}

void faid_out_result_outputs(faid_out_result *o, const faid_result *r)
{
    o->outputs = r->out;
    o->noutputs = (size_t)r->nout;
}

void faid_out_result_times(faid_out_result *o, faid_out_time *t, size_t max, const faid_result *r)
{
    size_t n = 0;
    for (int i = 0; i < faid_times_count() && n < max; i++) {
        const faid_time_decl *d = faid_times_at(i);
        if (d->key != FAID_KEY_UNKNOWN && (!d->peaks_only || r->peaks))
            t[n++] = (faid_out_time){.key = d->key, .us = faid_time_us(d, &r->t)};
    }
    o->times = t;
    o->ntimes = n;
}
