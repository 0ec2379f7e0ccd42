set terminal pngcairo noenhanced size 900,560 font 'DejaVu Sans,11'
set datafile missing '?'
set grid
set key bottom right
set ylabel 'test accuracy (%)'
set output 'docs/results/compress_defaults_seeds/accuracy_vs_epoch_all.png'
set title 'compress_defaults_seeds'
set xlabel 'epoch'
unset logscale x
plot 'docs/results/compress_defaults_seeds/plots/all_0.dat' using 1:2 with linespoints lw 2 pt 1 title 'dense_s2', \
     'docs/results/compress_defaults_seeds/plots/all_1.dat' using 1:2 with linespoints lw 2 pt 2 title 'dense_s3', \
     'docs/results/compress_defaults_seeds/plots/all_2.dat' using 1:2 with linespoints lw 2 pt 3 title 'sign_s2', \
     'docs/results/compress_defaults_seeds/plots/all_3.dat' using 1:2 with linespoints lw 2 pt 4 title 'sign_s3', \
     'docs/results/compress_defaults_seeds/plots/all_4.dat' using 1:2 with linespoints lw 2 pt 5 title 'signum_s2', \
     'docs/results/compress_defaults_seeds/plots/all_5.dat' using 1:2 with linespoints lw 2 pt 6 title 'signum_s3', \
     'docs/results/compress_defaults_seeds/plots/all_6.dat' using 1:2 with linespoints lw 2 pt 7 title 'randomk_ef_s1', \
     'docs/results/compress_defaults_seeds/plots/all_7.dat' using 1:2 with linespoints lw 2 pt 8 title 'randomk_ef_s2', \
     'docs/results/compress_defaults_seeds/plots/all_8.dat' using 1:2 with linespoints lw 2 pt 9 title 'randomk_ef_s3', \
     'docs/results/compress_defaults_seeds/plots/all_9.dat' using 1:2 with linespoints lw 2 pt 10 title 'randomk_ef_wm_s2', \
     'docs/results/compress_defaults_seeds/plots/all_10.dat' using 1:2 with linespoints lw 2 pt 11 title 'randomk_ef_wm_s3', \
     'docs/results/compress_defaults_seeds/plots/all_11.dat' using 1:2 with linespoints lw 2 pt 12 title 'adaptive_ef_s1', \
     'docs/results/compress_defaults_seeds/plots/all_12.dat' using 1:2 with linespoints lw 2 pt 1 title 'adaptive_ef_s2', \
     'docs/results/compress_defaults_seeds/plots/all_13.dat' using 1:2 with linespoints lw 2 pt 2 title 'adaptive_ef_s3', \
     'docs/results/compress_defaults_seeds/plots/all_14.dat' using 1:2 with linespoints lw 2 pt 3 title 'polar_s2', \
     'docs/results/compress_defaults_seeds/plots/all_15.dat' using 1:2 with linespoints lw 2 pt 4 title 'polar_s3', \
     'docs/results/compress_defaults_seeds/plots/all_16.dat' using 1:2 with linespoints lw 2 pt 5 title 'sbc_ef_s1', \
     'docs/results/compress_defaults_seeds/plots/all_17.dat' using 1:2 with linespoints lw 2 pt 6 title 'adaptive_s2', \
     'docs/results/compress_defaults_seeds/plots/all_18.dat' using 1:2 with linespoints lw 2 pt 7 title 'adaptive_s3'
set output 'docs/results/compress_defaults_seeds/accuracy_vs_time_all.png'
set title 'compress_defaults_seeds'
set xlabel 'wall time (s)'
unset logscale x
plot 'docs/results/compress_defaults_seeds/plots/all_0.dat' using 3:2 with linespoints lw 2 pt 1 title 'dense_s2', \
     'docs/results/compress_defaults_seeds/plots/all_1.dat' using 3:2 with linespoints lw 2 pt 2 title 'dense_s3', \
     'docs/results/compress_defaults_seeds/plots/all_2.dat' using 3:2 with linespoints lw 2 pt 3 title 'sign_s2', \
     'docs/results/compress_defaults_seeds/plots/all_3.dat' using 3:2 with linespoints lw 2 pt 4 title 'sign_s3', \
     'docs/results/compress_defaults_seeds/plots/all_4.dat' using 3:2 with linespoints lw 2 pt 5 title 'signum_s2', \
     'docs/results/compress_defaults_seeds/plots/all_5.dat' using 3:2 with linespoints lw 2 pt 6 title 'signum_s3', \
     'docs/results/compress_defaults_seeds/plots/all_6.dat' using 3:2 with linespoints lw 2 pt 7 title 'randomk_ef_s1', \
     'docs/results/compress_defaults_seeds/plots/all_7.dat' using 3:2 with linespoints lw 2 pt 8 title 'randomk_ef_s2', \
     'docs/results/compress_defaults_seeds/plots/all_8.dat' using 3:2 with linespoints lw 2 pt 9 title 'randomk_ef_s3', \
     'docs/results/compress_defaults_seeds/plots/all_9.dat' using 3:2 with linespoints lw 2 pt 10 title 'randomk_ef_wm_s2', \
     'docs/results/compress_defaults_seeds/plots/all_10.dat' using 3:2 with linespoints lw 2 pt 11 title 'randomk_ef_wm_s3', \
     'docs/results/compress_defaults_seeds/plots/all_11.dat' using 3:2 with linespoints lw 2 pt 12 title 'adaptive_ef_s1', \
     'docs/results/compress_defaults_seeds/plots/all_12.dat' using 3:2 with linespoints lw 2 pt 1 title 'adaptive_ef_s2', \
     'docs/results/compress_defaults_seeds/plots/all_13.dat' using 3:2 with linespoints lw 2 pt 2 title 'adaptive_ef_s3', \
     'docs/results/compress_defaults_seeds/plots/all_14.dat' using 3:2 with linespoints lw 2 pt 3 title 'polar_s2', \
     'docs/results/compress_defaults_seeds/plots/all_15.dat' using 3:2 with linespoints lw 2 pt 4 title 'polar_s3', \
     'docs/results/compress_defaults_seeds/plots/all_16.dat' using 3:2 with linespoints lw 2 pt 5 title 'sbc_ef_s1', \
     'docs/results/compress_defaults_seeds/plots/all_17.dat' using 3:2 with linespoints lw 2 pt 6 title 'adaptive_s2', \
     'docs/results/compress_defaults_seeds/plots/all_18.dat' using 3:2 with linespoints lw 2 pt 7 title 'adaptive_s3'
set output 'docs/results/compress_defaults_seeds/accuracy_vs_bytes_all.png'
set title 'compress_defaults_seeds'
set xlabel 'MB sent per worker'
set logscale x
plot 'docs/results/compress_defaults_seeds/plots/all_0.dat' using 4:2 with linespoints lw 2 pt 1 title 'dense_s2', \
     'docs/results/compress_defaults_seeds/plots/all_1.dat' using 4:2 with linespoints lw 2 pt 2 title 'dense_s3', \
     'docs/results/compress_defaults_seeds/plots/all_2.dat' using 4:2 with linespoints lw 2 pt 3 title 'sign_s2', \
     'docs/results/compress_defaults_seeds/plots/all_3.dat' using 4:2 with linespoints lw 2 pt 4 title 'sign_s3', \
     'docs/results/compress_defaults_seeds/plots/all_4.dat' using 4:2 with linespoints lw 2 pt 5 title 'signum_s2', \
     'docs/results/compress_defaults_seeds/plots/all_5.dat' using 4:2 with linespoints lw 2 pt 6 title 'signum_s3', \
     'docs/results/compress_defaults_seeds/plots/all_6.dat' using 4:2 with linespoints lw 2 pt 7 title 'randomk_ef_s1', \
     'docs/results/compress_defaults_seeds/plots/all_7.dat' using 4:2 with linespoints lw 2 pt 8 title 'randomk_ef_s2', \
     'docs/results/compress_defaults_seeds/plots/all_8.dat' using 4:2 with linespoints lw 2 pt 9 title 'randomk_ef_s3', \
     'docs/results/compress_defaults_seeds/plots/all_9.dat' using 4:2 with linespoints lw 2 pt 10 title 'randomk_ef_wm_s2', \
     'docs/results/compress_defaults_seeds/plots/all_10.dat' using 4:2 with linespoints lw 2 pt 11 title 'randomk_ef_wm_s3', \
     'docs/results/compress_defaults_seeds/plots/all_11.dat' using 4:2 with linespoints lw 2 pt 12 title 'adaptive_ef_s1', \
     'docs/results/compress_defaults_seeds/plots/all_12.dat' using 4:2 with linespoints lw 2 pt 1 title 'adaptive_ef_s2', \
     'docs/results/compress_defaults_seeds/plots/all_13.dat' using 4:2 with linespoints lw 2 pt 2 title 'adaptive_ef_s3', \
     'docs/results/compress_defaults_seeds/plots/all_14.dat' using 4:2 with linespoints lw 2 pt 3 title 'polar_s2', \
     'docs/results/compress_defaults_seeds/plots/all_15.dat' using 4:2 with linespoints lw 2 pt 4 title 'polar_s3', \
     'docs/results/compress_defaults_seeds/plots/all_16.dat' using 4:2 with linespoints lw 2 pt 5 title 'sbc_ef_s1', \
     'docs/results/compress_defaults_seeds/plots/all_17.dat' using 4:2 with linespoints lw 2 pt 6 title 'adaptive_s2', \
     'docs/results/compress_defaults_seeds/plots/all_18.dat' using 4:2 with linespoints lw 2 pt 7 title 'adaptive_s3'
